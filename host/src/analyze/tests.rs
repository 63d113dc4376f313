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
        ..Rules::default()
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
    let constraints = crate::cli::parse::memory_constraints(&["DTCM=4096".to_string()]).unwrap();
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
    let error = analyze(model(), &target, &Constraints::default(), &staged_to_flash).unwrap_err();
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
    let analysis = analyze(model(), &Target::generic(), &constraints, &Rules::default()).unwrap();
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
    crate::cli::parse::memory_constraints(&values).unwrap()
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
        "Raise the budget: no plan fits in less than 164 bytes, and the shipped planners need \
         176 (arenas rounded to their alignment; --memory DTCM=176), or move tensors out of \
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
    let mut analysis = analyze(big, &target, &Constraints::default(), &scratch_in("DTCM")).unwrap();
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
        error
            .message
            .contains("DTCM has only 65536 bytes on target apollo3_evb: move tensors out of it"),
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
    use memplan_planner_kit::{pack_greedy, plan_with_packer, Buffer, Fit, Order, Packer, Packing};
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
        crate::input::Constraints::read(&examples.join("limits.json")).unwrap(),
        Some(&examples.join("apollo3_rules.json")),
        crate::input::ExternalIo::default(),
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

#[test]
fn external_io_kinds_and_rules_leave_tensors_out_of_the_planner_request() {
    let mut rules = rules(vec![
        // The output stays in the arena despite --external-io outputs.
        rule(
            KindSelector::Kind(TensorKind::Output),
            None,
            Attributes {
                external: Some(false),
                ..Attributes::default()
            },
        ),
        // A view made external takes its root along.
        rule(
            KindSelector::Any,
            Some(&["view"]),
            Attributes {
                external: Some(true),
                ..Attributes::default()
            },
        ),
    ]);
    rules.external_io.kinds = vec![TensorKind::Input, TensorKind::Output];
    let analysis = analyze(model(), &Target::generic(), &Constraints::default(), &rules).unwrap();
    let external: Vec<usize> = analysis.external.indices().collect();
    assert_eq!(external, vec![0, 1, 5]);
    let planner = analysis.planner_request();
    let ids: Vec<&str> = planner.tensors.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["out", "w", "state"]);
    // A plan file's ids are external whatever the rules say.
    rules.external_io.ids = vec!["out".to_string()];
    let analysis = analyze(model(), &Target::generic(), &Constraints::default(), &rules).unwrap();
    assert_eq!(
        analysis.external.indices().collect::<Vec<_>>(),
        vec![0, 1, 2, 5]
    );
}

#[test]
fn external_tensors_leave_the_pinned_lower_bound() {
    let pin_input = rule(
        KindSelector::Kind(TensorKind::Input),
        None,
        Attributes {
            memory: Some("SRAM".into()),
            ..Attributes::default()
        },
    );
    let mut rules = rules(vec![pin_input]);
    let pinned = analyze(model(), &Target::generic(), &Constraints::default(), &rules).unwrap();
    // SRAM must hold the pinned input: 100 bytes rounded to the arena alignment 16 on the
    // generic target, less the top tensor's padding.
    assert_eq!(pinned.memory_lower_bounds, vec![100, 8]);
    rules.external_io.kinds = vec![TensorKind::Input];
    let external = analyze(model(), &Target::generic(), &Constraints::default(), &rules).unwrap();
    assert_eq!(external.memory_lower_bounds, vec![0, 8]);
}
