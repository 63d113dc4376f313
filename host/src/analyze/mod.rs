//! Analyze stage: turns a [`Model`] plus target, constraints and rules into the plan request
//! a planner receives: inclusive lifetimes, merged alias chains, slot alignment, resolved
//! placement attributes and memory budgets.
//!
//! Order of work: memory limits (constraints checked against the target), rules checked
//! against the target, alias roots ([`aliases`]), lifetimes ([`lifetimes`]), then one pass
//! over the tensors resolving attributes, alignment and memories; last, the lower bound of
//! what must go to each memory, and a does-not-fit error (exit 5) when one exceeds its
//! budget, before any planner runs (the `fit` module). Everything is O(n) apart from those bounds
//! (O(n log n) sweeps).

pub mod aliases;
mod fit;
pub mod lifetimes;

use std::collections::HashSet;
use std::path::PathBuf;

use abi_stable::std_types::{RNone, RSome, RString, RVec};
use memplan_plugin_api::{AliasOf, MemoryRequest, PlanRequest, TensorKind, TensorRequest};

use crate::error::{Error, Result};
use crate::input::{Constraints, Model, Rules, Target};

/// Arena base alignment never goes below this (heliaAOT's floor).
pub const MIN_ARENA_ALIGNMENT: u64 = 16;

/// What the later stages know about the model.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The model file, for messages.
    pub source: PathBuf,
    /// Name of the target the memories come from.
    pub target: String,
    /// What the planner receives (its `options` field is filled in by the plan command).
    pub request: PlanRequest,
    /// Tensor names, by tensor index.
    pub names: Vec<String>,
    /// Bytes of constant tensors, by tensor index (`None` for non-constants and for aliases
    /// of constants, whose bytes are their root's).
    pub constant_data: Vec<Option<Vec<u8>>>,
    /// By memory index: the lower bound of the bytes that must go there in any valid plan —
    /// the tensors pinned to the memory (constants by their destination, scratch and
    /// persistent tensors by a `memory` rule), the sum over the three roles of the least size
    /// of the arena they force (see the `fit` module). Tensors the planner may place freely
    /// are not counted.
    pub memory_lower_bounds: Vec<u64>,
    /// Set when some memory's bound exceeds its budget: no plan can fit, and the error says
    /// which memory, the bytes and what to change (exit 5). Commands that plan stop on it
    /// before running a planner ([`Analysis::ensure_plannable`]); `check` goes on, as the
    /// budget violations of the plan it is given are its report.
    pub pinned_overflow: Option<Error>,
}

/// Runs the analysis.
pub fn analyze(
    model: Model,
    target: &Target,
    constraints: &Constraints,
    rules: &Rules,
) -> Result<Analysis> {
    let limits = constraints.apply(target)?;
    check_rule_memories(target, rules)?;
    let model = lifetimes::tflite_micro::resolve(model)?;
    let roots = aliases::resolve(&model)?;
    let lifetimes = lifetimes::derive(&model, &roots)?;
    let file = model.path.display().to_string();
    if let (count @ 1.., Some(first)) = lifetimes.unused {
        tracing::warn!(
            "{file}: {count} tensor(s) are never used (first: '{}'); they get lifetime [0, 0]",
            model.tensors[first as usize].id
        );
    }

    let memories: Vec<MemoryRequest> = target
        .memories
        .iter()
        .zip(&limits)
        .map(|(memory, limit)| MemoryRequest {
            name: RString::from(memory.name.as_str()),
            budget: limit.budget.into(),
            writable: memory.writable,
            scratch_order: memory.scratch_order.into(),
            arena_alignment: MIN_ARENA_ALIGNMENT
                .max(target.min_alignment)
                .max(limit.arena_alignment.unwrap_or(1)),
        })
        .collect();
    // A tensor the planner may put in any scratch memory gets the strictest arena alignment
    // the user asked for among them, so its slot is valid wherever it lands.
    let free_alignment = target
        .memories
        .iter()
        .zip(&limits)
        .filter(|(memory, _)| memory.scratch_order.is_some())
        .filter_map(|(_, limit)| limit.arena_alignment)
        .max()
        .unwrap_or(1);
    let memory_index = |name: &str| -> Result<u32> {
        target.memory_index(name).map(|i| i as u32).ok_or_else(|| {
            Error::internal(format!(
                "memory {name} vanished after the rules were checked"
            ))
        })
    };
    let default_constant_memory = target.default_constant_memory() as u32;

    let resolver = rules.resolver();
    let mut named_by_rules: HashSet<&str> = HashSet::new();
    let n = model.tensors.len();
    let mut tensors: Vec<TensorRequest> = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut constant_data = Vec::with_capacity(n);
    for (index, tensor) in model.tensors.into_iter().enumerate() {
        let attributes = resolver.resolve(tensor.kind, &tensor.id);
        if let Some(named) = resolver.named(&tensor.id) {
            named_by_rules.insert(named);
        }
        let (memory, source_memory) = if tensor.kind == TensorKind::Constant {
            let source = match &attributes.memory {
                Some(name) => memory_index(name)?,
                None => default_constant_memory,
            };
            let destination = match &attributes.constant_destination_memory {
                Some(name) => memory_index(name)?,
                None => source,
            };
            (RSome(destination), RSome(source))
        } else {
            let memory = match &attributes.memory {
                Some(name) => RSome(memory_index(name)?),
                None => RNone,
            };
            if let RSome(m) = memory {
                if !target.memories[m as usize].writable {
                    return Err(Error::input(format!(
                        "{file}: tensor '{}' ({}) is placed in {} by the rules, but {} is read-only; only constants may live there",
                        tensor.id,
                        tensor.kind.as_str(),
                        target.memories[m as usize].name,
                        target.memories[m as usize].name
                    )));
                }
            }
            (memory, RNone)
        };
        let memory_alignment = match memory {
            RSome(m) => limits[m as usize].arena_alignment.unwrap_or(1),
            RNone => free_alignment,
        };
        let alignment = target
            .min_alignment
            .max(
                tensor
                    .element_size
                    .max(1)
                    .checked_next_power_of_two()
                    .unwrap_or(1 << 63),
            )
            .max(tensor.alignment.unwrap_or(1))
            .max(attributes.alignment.unwrap_or(1))
            .max(memory_alignment);
        if let Some(offset) = tensor.fixed_offset.filter(|o| o % alignment != 0) {
            return Err(Error::input(format!(
                "{file}: tensor '{}': fixed_offset {offset} is not a multiple of its alignment {alignment}; move it or lower the alignment",
                tensor.id
            )));
        }
        let alias_of = match tensor.alias_of {
            Some(_) => RSome(AliasOf {
                root: roots.root[index],
                offset: roots.offset[index],
            }),
            None => RNone,
        };
        names.push(tensor.name);
        constant_data.push(if tensor.kind == TensorKind::Constant {
            tensor.data
        } else {
            None
        });
        tensors.push(TensorRequest {
            id: RString::from(tensor.id),
            kind: tensor.kind,
            size: tensor.size,
            alignment,
            lifetime: lifetimes.lifetimes[index],
            alias_of,
            fixed_offset: tensor.fixed_offset.into(),
            memory,
            source_memory,
        });
    }
    // A view lives in its root's slot, so it is in its root's memory whatever rules say.
    for index in 0..n {
        if let RSome(alias) = tensors[index].alias_of {
            let root = &tensors[alias.root as usize];
            let (memory, source_memory) = (root.memory, root.source_memory);
            tensors[index].memory = memory;
            tensors[index].source_memory = source_memory;
        }
    }
    for id in resolver.ids().filter(|id| !named_by_rules.contains(id)) {
        tracing::warn!(
            "{}: the rules name tensor '{id}', which {file} does not have",
            rules.origin_file()
        );
    }

    let floors = fit::pinned_floors(&tensors, memories.len());
    let memory_lower_bounds: Vec<u64> = floors.iter().map(fit::total).collect();
    tracing::debug!(
        "{file}: {} tensors, {} steps on target {}; lower bounds of what must go in each memory: {}",
        tensors.len(),
        lifetimes.num_steps,
        target.name,
        memories
            .iter()
            .zip(&memory_lower_bounds)
            .map(|(memory, bound)| format!("{} {bound}", memory.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let pinned_overflow =
        fit::check_pinned_fit(&file, target, constraints, &memories, &tensors, &floors).err();
    Ok(Analysis {
        source: model.path,
        target: target.name.clone(),
        request: PlanRequest {
            tensors: RVec::from(tensors),
            memories: RVec::from(memories),
            num_steps: lifetimes.num_steps,
            options: RString::from("{}"),
        },
        names,
        constant_data,
        memory_lower_bounds,
        pinned_overflow,
    })
}

impl Analysis {
    /// Fails with exit 5 when the tensors pinned to a memory alone exceed its budget (see
    /// [`Analysis::pinned_overflow`]): then no planner is worth running.
    pub fn ensure_plannable(&mut self) -> Result<()> {
        match self.pinned_overflow.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Every memory a rule names exists on the target, and staging destinations are writable.
fn check_rule_memories(target: &Target, rules: &Rules) -> Result<()> {
    for (index, rule) in rules.rules.iter().enumerate() {
        let attributes = &rule.attributes;
        for name in [&attributes.memory, &attributes.constant_destination_memory]
            .into_iter()
            .flatten()
        {
            if target.memory_index(name).is_none() {
                return Err(Error::input(format!(
                    "{}: memory `{name}` is not on target {}; its memories are {}",
                    rules.origin(index),
                    target.name,
                    target.memory_names()
                )));
            }
        }
        if let Some(name) = &attributes.constant_destination_memory {
            let memory = &target.memories[target.memory_index(name).unwrap_or(0)];
            if !memory.writable {
                return Err(Error::input(format!(
                    "{}: constant_destination_memory {} is read-only; constants are copied there at boot, so pick a writable memory",
                    rules.origin(index),
                    memory.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::rules::{Attributes, KindSelector, Rule};
    use crate::input::{ModelAlias, Operator, Tensor};
    use memplan_plugin_api::Lifetime;

    /// in(0) -> op0 -> mid(1) -> op1(mid, w) -> out(2); w(3) constant; state(4) persistent;
    /// view(5) an alias of mid.
    fn model() -> Model {
        use TensorKind::*;
        let mut tensors = vec![
            Tensor::new("in", Input, 100),
            Tensor::new("mid", Intermediate, 64),
            Tensor::new("out", Output, 10),
            Tensor::new("w", Constant, 8),
            Tensor::new("state", Persistent, 32),
            Tensor::new("view", Intermediate, 16),
        ];
        tensors[3].data = Some(vec![1; 8]);
        tensors[3].element_size = 4;
        tensors[5].alias_of = Some(ModelAlias {
            target: 1,
            offset: 48,
        });
        Model {
            path: "m.json".into(),
            tensors,
            operators: vec![
                Operator {
                    op_type: "conv".into(),
                    inputs: vec![0],
                    outputs: vec![1],
                },
                Operator {
                    op_type: "fc".into(),
                    inputs: vec![5, 3, 4],
                    outputs: vec![2],
                },
            ],
            inputs: vec![0],
            outputs: vec![2],
            ..Model::default()
        }
    }

    fn rule(selector: KindSelector, ids: Option<&[&str]>, attributes: Attributes) -> Rule {
        Rule {
            selector,
            ids: ids.map(|ids| ids.iter().map(|id| id.to_string()).collect()),
            attributes,
        }
    }

    fn rules(list: Vec<Rule>) -> Rules {
        Rules {
            path: Some("rules.json".into()),
            rules: list,
        }
    }

    #[test]
    fn generic_target_request() {
        let analysis = analyze(
            model(),
            &Target::generic(),
            &Constraints::default(),
            &Rules::default(),
        )
        .unwrap();
        let request = &analysis.request;
        assert_eq!(request.num_steps, 3);
        assert_eq!(request.memories.len(), 2);
        assert_eq!(request.memories[0].budget, RNone);
        assert_eq!(request.memories[0].arena_alignment, 16);
        let w = &request.tensors[3];
        assert_eq!((w.memory, w.source_memory), (RSome(1), RSome(1)));
        assert_eq!(w.alignment, 4);
        assert_eq!(w.lifetime, Lifetime::new(0, 2));
        let view = &request.tensors[5];
        assert_eq!(
            view.alias_of,
            RSome(AliasOf {
                root: 1,
                offset: 48
            })
        );
        assert_eq!(view.lifetime, Lifetime::new(1, 2));
        assert_eq!(request.tensors[1].lifetime, Lifetime::new(1, 2));
        assert_eq!(request.tensors[0].memory, RNone);
        assert_eq!(analysis.constant_data[3].as_deref(), Some(&[1u8; 8][..]));
        assert_eq!(analysis.constant_data[0], None);
        // Only the constant is pinned: FLASH must hold its 8 bytes, SRAM nothing for sure.
        assert_eq!(analysis.memory_lower_bounds, vec![0, 8]);
    }

    #[test]
    fn rules_pin_stage_and_align_on_a_preset() {
        let rules = rules(vec![
            rule(
                KindSelector::Scratch,
                None,
                Attributes {
                    memory: Some("dtcm".into()),
                    ..Attributes::default()
                },
            ),
            rule(
                KindSelector::Kind(TensorKind::Constant),
                None,
                Attributes {
                    constant_destination_memory: Some("SRAM".into()),
                    ..Attributes::default()
                },
            ),
            rule(
                KindSelector::Any,
                Some(&["out"]),
                Attributes {
                    alignment: Some(64),
                    ..Attributes::default()
                },
            ),
        ]);
        let constraints = Constraints::from_args(&["DTCM=4096".to_string()]).unwrap();
        let target = Target::preset("apollo3_evb").unwrap();
        let analysis = analyze(model(), &target, &constraints, &rules).unwrap();
        let request = &analysis.request;
        assert_eq!(request.memories[0].budget, RSome(4096));
        assert_eq!(request.memories[1].budget, RSome(327_680));
        let w = &request.tensors[3];
        assert_eq!(
            (w.memory, w.source_memory),
            (RSome(1), RSome(2)),
            "staged MRAM -> SRAM"
        );
        assert_eq!(request.tensors[0].memory, RSome(0));
        assert_eq!(request.tensors[0].alignment, 4, "min alignment of apollo3");
        assert_eq!(request.tensors[2].alignment, 64);
        // The view follows its root into DTCM whatever rules say.
        assert_eq!(request.tensors[5].memory, RSome(0));
        // DTCM: in(100, steps 0..1) + mid(64, 1..2) + out(64 aligned, 2) peak = 100 + 64 at
        // step 1 = 164; SRAM: the staged constant (8).
        assert_eq!(analysis.memory_lower_bounds, vec![164, 8, 0]);
    }

    #[test]
    fn rule_and_placement_errors_say_what_to_fix() {
        let target = Target::preset("apollo3_evb").unwrap();
        let unknown = rules(vec![rule(
            KindSelector::Any,
            None,
            Attributes {
                memory: Some("PSRAM".into()),
                ..Attributes::default()
            },
        )]);
        let error = analyze(model(), &target, &Constraints::default(), &unknown).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(
            error.message.contains("rules.json: rule 0: memory `PSRAM`"),
            "{}",
            error.message
        );
        let read_only = rules(vec![rule(
            KindSelector::Kind(TensorKind::Persistent),
            None,
            Attributes {
                memory: Some("MRAM".into()),
                ..Attributes::default()
            },
        )]);
        let error = analyze(model(), &target, &Constraints::default(), &read_only).unwrap_err();
        assert!(
            error.message.contains("tensor 'state' (persistent)"),
            "{}",
            error.message
        );
        let staged_to_flash = rules(vec![rule(
            KindSelector::Kind(TensorKind::Constant),
            None,
            Attributes {
                constant_destination_memory: Some("MRAM".into()),
                ..Attributes::default()
            },
        )]);
        let error =
            analyze(model(), &target, &Constraints::default(), &staged_to_flash).unwrap_err();
        assert!(error.message.contains("is read-only"), "{}", error.message);
        let mut misaligned = model();
        misaligned.tensors[1].fixed_offset = Some(2);
        let error = analyze(
            misaligned,
            &target,
            &Constraints::default(),
            &Rules::default(),
        )
        .unwrap_err();
        assert!(
            error.message.contains("tensor 'mid': fixed_offset 2"),
            "{}",
            error.message
        );
    }

    #[test]
    fn constraint_arena_alignment_raises_slots_and_arenas() {
        let dir = std::env::temp_dir().join(format!("memplan-analyze-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("limits.json");
        std::fs::write(&path, r#"[{"name":"SRAM","arena_alignment":128}]"#).unwrap();
        let constraints = Constraints::read(&path).unwrap();
        let analysis =
            analyze(model(), &Target::generic(), &constraints, &Rules::default()).unwrap();
        assert_eq!(analysis.request.memories[0].arena_alignment, 128);
        assert_eq!(analysis.request.tensors[0].alignment, 128);
        assert_eq!(
            analysis.request.tensors[3].alignment, 4,
            "constants live in FLASH"
        );
    }

    /// Rules that pin every scratch tensor to `memory`.
    fn scratch_in(memory: &str) -> Rules {
        rules(vec![rule(
            KindSelector::Scratch,
            None,
            Attributes {
                memory: Some(memory.into()),
                ..Attributes::default()
            },
        )])
    }

    fn limits(values: &[&str]) -> Constraints {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        Constraints::from_args(&values).unwrap()
    }

    #[test]
    fn pinned_tensors_over_a_budget_do_not_fit_before_any_planner_runs() {
        let target = Target::preset("apollo3_evb").unwrap();
        // DTCM: in (100) and mid (64) are live together at step 1, all aligned to 4: 164.
        // MRAM: the constant w, 8 bytes.
        let mut analysis = analyze(
            model(),
            &target,
            &limits(&["DTCM=100", "MRAM=4"]),
            &scratch_in("DTCM"),
        )
        .unwrap();
        let error = analysis.ensure_plannable().unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::DoesNotFit);
        let message = &error.message;
        for needle in [
            "m.json: the tensors pinned to memory DTCM need at least 164 bytes but the budget is \
             100 bytes (--memory DTCM=100), so no plan can fit and no planner was run",
            "pinned there: scratch tensors (placed there by `memory` rules) 164 bytes",
            "the largest: 'in' (input, 100 bytes), 'mid' (intermediate, 64 bytes), 'out' \
             (output, 10 bytes).",
            "Raise the budget to at least 164 bytes (--memory DTCM=164) or move tensors out of \
             DTCM with the rules (`memory`, `constant_destination_memory`)",
            // Every memory over its budget is reported, constants too (read-only MRAM has a
            // budget like any memory, charged for the constants placed there).
            "\nm.json: the tensors pinned to memory MRAM need at least 8 bytes but the budget \
             is 4 bytes (--memory MRAM=4)",
            "pinned there: constants (it is their destination memory) 8 bytes; the largest: \
             'w' (constant, 8 bytes).",
        ] {
            assert!(message.contains(needle), "missing {needle:?} in\n{message}");
        }
        assert!(!message.contains("SRAM"), "{message}");

        // Exactly the bound fits.
        let mut analysis = analyze(
            model(),
            &target,
            &limits(&["DTCM=164", "MRAM=8"]),
            &scratch_in("DTCM"),
        )
        .unwrap();
        assert!(analysis.ensure_plannable().is_ok());
        assert_eq!(analysis.memory_lower_bounds, vec![164, 0, 8]);
    }

    #[test]
    fn over_the_capacity_the_message_does_not_offer_a_larger_budget() {
        let mut big = model();
        big.tensors[0].size = 70_000;
        let target = Target::preset("apollo3_evb").unwrap();
        let mut analysis =
            analyze(big, &target, &Constraints::default(), &scratch_in("DTCM")).unwrap();
        let error = analysis.ensure_plannable().unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::DoesNotFit);
        assert!(
            error.message.contains(
                "need at least 70064 bytes but the budget is 65536 bytes (its capacity on \
                 target apollo3_evb)"
            ),
            "{}",
            error.message
        );
        assert!(
            error.message.contains(
                "DTCM has only 65536 bytes on target apollo3_evb: move tensors out of it"
            ),
            "{}",
            error.message
        );
        assert!(!error.message.contains("--memory"), "{}", error.message);
        // Unpinned, the same tensors are the planner's to spill: no early stop.
        let mut big = model();
        big.tensors[0].size = 70_000;
        analyze(big, &target, &Constraints::default(), &Rules::default()).unwrap();
    }

    /// The early stop uses a bound no valid plan can beat: here the kit itself plans within a
    /// budget below the sum of each tensor's size rounded to its own alignment, and the
    /// analysis lets it.
    #[test]
    fn the_early_stop_never_rejects_what_the_kit_plans() {
        use memplan_planner_kit::{
            pack_greedy, plan_with_packer, Buffer, Fit, Order, Packer, Packing,
        };
        use memplan_plugin_api::bounds::{align_up, lower_bound};
        use memplan_plugin_api::{HostContext, PlanError};
        struct Greedy;
        impl Packer for Greedy {
            fn pack(&self, buffers: &[Buffer], _: &HostContext) -> Result<Packing, PlanError> {
                Ok(pack_greedy(buffers, Order::Size, Fit::Best))
            }
        }
        // a (16 bytes, aligned to 64) at 0, b (8, aligned to 16) at 16 and c (8, aligned to
        // 16) at 32, all live at step 0: 40 bytes high, an arena of 64.
        use TensorKind::*;
        let mut tensors = vec![
            Tensor::new("a", Input, 16),
            Tensor::new("b", Input, 8),
            Tensor::new("c", Output, 8),
        ];
        for (tensor, (alignment, offset)) in tensors.iter_mut().zip([(64, 0), (16, 16), (16, 32)]) {
            tensor.alignment = Some(alignment);
            tensor.fixed_offset = Some(offset);
        }
        let model = Model {
            path: "fixed.json".into(),
            tensors,
            operators: vec![Operator {
                op_type: "add".into(),
                inputs: vec![0, 1],
                outputs: vec![2],
            }],
            inputs: vec![0, 1],
            outputs: vec![2],
            ..Model::default()
        };
        let analysis = analyze(
            model,
            &Target::generic(),
            &limits(&["SRAM=64"]),
            &scratch_in("SRAM"),
        )
        .unwrap();
        let request = &analysis.request;
        let own_alignment = lower_bound(
            request
                .tensors
                .iter()
                .map(|t| (align_up(t.size, t.alignment), t.lifetime)),
        );
        assert_eq!(
            own_alignment, 96,
            "rounding each to its own alignment would stop here"
        );
        assert_eq!(analysis.memory_lower_bounds, vec![40, 0]);
        let plan = plan_with_packer(request, &HostContext::detached(), &Greedy).unwrap();
        assert_eq!(plan.arenas.len(), 1);
        assert_eq!(plan.arenas[0].size, 64);
        crate::check::check_plan(&analysis, plan).unwrap();
    }

    /// The shipped example, on the generic target and on apollo3 with the example rules and
    /// limits (figures worked out by hand in docs/model-format.md's terms).
    #[test]
    fn the_shipped_example_analyses() {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let model = || crate::input::read_model(&examples.join("tiny_conv.json")).unwrap();
        let generic = analyze(
            model(),
            &Target::generic(),
            &Constraints::default(),
            &Rules::default(),
        )
        .unwrap();
        assert_eq!(generic.request.num_steps, 5);
        let flat = &generic.request.tensors[5];
        assert_eq!(flat.alias_of, RSome(AliasOf { root: 4, offset: 0 }));
        assert_eq!(flat.lifetime, Lifetime::new(2, 3));
        assert_eq!(generic.names[5], "pool_out/reshape");
        // FLASH holds the three constants: 36 + 16 + 640 bytes.
        assert_eq!(generic.memory_lower_bounds, vec![0, 692]);

        let setup = crate::input::TargetSetup::load(
            Some("apollo3_evb"),
            &[examples.join("limits.json").display().to_string()],
            Some(&examples.join("apollo3_rules.json")),
        )
        .unwrap();
        let apollo3 = analyze(model(), &setup.target, &setup.constraints, &setup.rules).unwrap();
        let fc_w = &apollo3.request.tensors[6];
        assert_eq!(
            (fc_w.memory, fc_w.source_memory, fc_w.alignment),
            (RSome(1), RSome(2), 32)
        );
        assert_eq!(apollo3.request.memories[0].budget, RSome(16_384));
        assert_eq!(apollo3.request.memories[0].arena_alignment, 32);
        // DTCM peak at step 1: image (100) + conv_out (256), both aligned to 32, so a plan
        // may put image on top, unpadded; SRAM: staged fc_w; MRAM: the cold constants conv_w
        // (36) and conv_b (16).
        assert_eq!(apollo3.memory_lower_bounds, vec![356, 640, 52]);
    }
}
