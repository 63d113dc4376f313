//! Attribute rules (heliaAOT's semantics): set a tensor's placement memory, a constant's
//! destination memory (staging), alignment and whether it is *external* (in a buffer the
//! caller owns, outside every arena), matched by kind and/or id.
//!
//! Rules apply in ascending specificity — neither id nor type, type only, id only, id and
//! type — and within one specificity in file order; a later rule's keys override earlier ones,
//! keys it does not set are kept.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::external_io::ExternalIo;
use crate::input::model::{alignment_problem, TensorKind};
use crate::input::source::{parse_json, read_text, JsonId, MAX_SETTINGS_FILE_BYTES};

/// Which tensor kinds a rule matches (`type` in the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindSelector {
    /// `*` or no `type`: every tensor.
    Any,
    /// `scratch`: inputs, outputs and intermediates.
    Scratch,
    /// One kind: `constant`, `persistent`, `input`, `output`, `intermediate`.
    Kind(TensorKind),
}

impl KindSelector {
    fn parse(text: &str) -> Option<KindSelector> {
        Some(match text {
            "*" => KindSelector::Any,
            "scratch" => KindSelector::Scratch,
            "constant" => KindSelector::Kind(TensorKind::Constant),
            "persistent" => KindSelector::Kind(TensorKind::Persistent),
            "input" => KindSelector::Kind(TensorKind::Input),
            "output" => KindSelector::Kind(TensorKind::Output),
            "intermediate" => KindSelector::Kind(TensorKind::Intermediate),
            _ => return None,
        })
    }

    pub fn matches(self, kind: TensorKind) -> bool {
        match self {
            KindSelector::Any => true,
            KindSelector::Scratch => kind.role() == memplan_plugin_api::ArenaRole::Scratch,
            KindSelector::Kind(k) => k == kind,
        }
    }
}

/// What a rule sets. Memory names are as written; the analysis checks them against the target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Placement memory; for a constant, the memory its bytes are stored in (source).
    pub memory: Option<String>,
    /// Constants only: the writable memory the bytes are copied to at boot (staged).
    pub constant_destination_memory: Option<String>,
    /// Minimum alignment of the tensor's slot (a power of two).
    pub alignment: Option<u64>,
    /// `true`: the tensor lives in a buffer the caller owns and binds at run time, not in an
    /// arena (`false` keeps it in an arena against a less specific rule or `--external-io`).
    pub external: Option<bool>,
}

impl Attributes {
    /// Keys set in `later` replace ours.
    pub fn overlay(&mut self, later: &Attributes) {
        if later.memory.is_some() {
            self.memory.clone_from(&later.memory);
        }
        if later.constant_destination_memory.is_some() {
            self.constant_destination_memory
                .clone_from(&later.constant_destination_memory);
        }
        if later.alignment.is_some() {
            self.alignment = later.alignment;
        }
        if later.external.is_some() {
            self.external = later.external;
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub selector: KindSelector,
    /// Tensor ids the rule is limited to; `None` matches any id.
    pub ids: Option<Vec<String>>,
    pub attributes: Attributes,
}

impl Rule {
    /// Sort key: rules with an id are more specific than rules with only a type.
    fn specificity(&self) -> (bool, bool) {
        (self.ids.is_some(), self.selector != KindSelector::Any)
    }
}

/// The rules of one file, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// The rules file, for messages (`None` when no file was given).
    pub path: Option<PathBuf>,
    pub rules: Vec<Rule>,
    /// Externality from outside the rules file: `--external-io` kinds (beneath every rule)
    /// and the ids a plan file lists as external (above every rule).
    pub external_io: ExternalIo,
}

impl Rules {
    /// Reads a rules file: `[rule, ...]` or `{"rules": [rule, ...]}` with
    /// `rule = {"type": "*"|"scratch"|KIND, "id": ID|[ID...]|null, "attributes": {...}}`.
    pub fn read(path: &Path) -> Result<Rules> {
        let text = read_text(path, "an attribute rules JSON", MAX_SETTINGS_FILE_BYTES)?;
        let what = "an attribute rules JSON (docs/model-format.md, \"Attribute rules\")";
        let docs: Vec<RuleDoc> = if text.trim_start().starts_with('[') {
            parse_json(path, &text, what)?
        } else {
            parse_json::<RulesFileDoc>(path, &text, what)?.rules
        };
        let mut rules = Vec::with_capacity(docs.len());
        for (index, doc) in docs.into_iter().enumerate() {
            let at =
                |what: String| Error::input(format!("{}: rule {index}: {what}", path.display()));
            let selector = match doc.kind.as_deref() {
                None => KindSelector::Any,
                Some(text) => KindSelector::parse(text).ok_or_else(|| {
                    at(format!(
                        "unknown type `{text}`; use *, scratch, constant, persistent, input, output or intermediate"
                    ))
                })?,
            };
            if let Some(problem) = doc.attributes.alignment.and_then(alignment_problem) {
                return Err(at(problem));
            }
            let ids = doc.id.map(|ids| match ids {
                IdsDoc::One(id) => vec![id.0.into_owned()],
                IdsDoc::Many(ids) => ids.into_iter().map(|id| id.0.into_owned()).collect(),
            });
            rules.push(Rule {
                selector,
                ids,
                attributes: Attributes {
                    memory: doc.attributes.memory,
                    constant_destination_memory: doc.attributes.constant_destination_memory,
                    alignment: doc.attributes.alignment,
                    external: doc.attributes.external,
                },
            });
        }
        Ok(Rules {
            path: Some(path.to_path_buf()),
            rules,
            external_io: ExternalIo::default(),
        })
    }

    /// Where a rule came from, for messages: `rules.json: rule 3`.
    pub fn origin(&self, index: usize) -> String {
        match &self.path {
            Some(path) => format!("{}: rule {index}", path.display()),
            None => format!("rule {index}"),
        }
    }

    /// The rules file for messages (`rules` when none was given).
    pub fn origin_file(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "rules".to_string(), |path| path.display().to_string())
    }

    /// Precomputes the lookup [`RuleResolver::resolve`] needs: O(rules) once, then O(1) for a
    /// tensor that no id rule names.
    pub fn resolver(&self) -> RuleResolver<'_> {
        let mut order: Vec<usize> = (0..self.rules.len()).collect();
        // Stable: equal specificity keeps file order.
        order.sort_by_key(|&i| self.rules[i].specificity());
        let kinds = [
            TensorKind::Input,
            TensorKind::Output,
            TensorKind::Intermediate,
            TensorKind::Constant,
            TensorKind::Persistent,
        ];
        let by_kind = kinds.map(|kind| {
            let mut merged = Attributes {
                external: self.external_io.kinds.contains(&kind).then_some(true),
                ..Attributes::default()
            };
            for &i in &order {
                let rule = &self.rules[i];
                if rule.ids.is_none() && rule.selector.matches(kind) {
                    merged.overlay(&rule.attributes);
                }
            }
            (kind, merged)
        });
        let mut by_id: HashMap<&str, Vec<&Rule>> = HashMap::new();
        for &i in &order {
            let rule = &self.rules[i];
            for id in rule.ids.iter().flatten() {
                by_id.entry(id.as_str()).or_default().push(rule);
            }
        }
        let external_ids = self.external_io.ids.iter().map(String::as_str).collect();
        RuleResolver {
            by_kind,
            by_id,
            external_ids,
        }
    }
}

/// Resolves the attributes of one tensor.
pub struct RuleResolver<'r> {
    by_kind: [(TensorKind, Attributes); 5],
    /// Id rules naming each id, in application order.
    by_id: HashMap<&'r str, Vec<&'r Rule>>,
    /// Ids a plan file lists as external: external whatever the rules say.
    external_ids: HashSet<&'r str>,
}

impl<'r> RuleResolver<'r> {
    /// The attributes of the tensor `id` of `kind`, all matching rules applied in order.
    pub fn resolve(&self, kind: TensorKind, id: &str) -> std::borrow::Cow<'_, Attributes> {
        let base = &self
            .by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("every kind has an entry")
            .1;
        let mut attributes = match self.by_id.get(id) {
            None => std::borrow::Cow::Borrowed(base),
            Some(rules) => {
                let mut merged = base.clone();
                for rule in rules.iter().filter(|rule| rule.selector.matches(kind)) {
                    merged.overlay(&rule.attributes);
                }
                std::borrow::Cow::Owned(merged)
            }
        };
        if self.external_ids.contains(id) {
            attributes.to_mut().external = Some(true);
        }
        attributes
    }

    /// Ids a plan file lists as external, for a warning about ids the model does not have.
    pub fn external_ids(&self) -> impl Iterator<Item = &'r str> + '_ {
        self.external_ids.iter().copied()
    }

    /// Ids named by rules, for a warning about ids the model does not have.
    pub fn ids(&self) -> impl Iterator<Item = &'r str> + '_ {
        self.by_id.keys().copied()
    }

    /// The rules' spelling of `id` when some rule names it.
    pub fn named(&self, id: &str) -> Option<&'r str> {
        self.by_id.get_key_value(id).map(|(key, _)| *key)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFileDoc<'a> {
    #[serde(borrow)]
    rules: Vec<RuleDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDoc<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default, borrow)]
    id: Option<IdsDoc<'a>>,
    #[serde(default)]
    attributes: AttributesDoc,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IdsDoc<'a> {
    #[serde(borrow)]
    One(JsonId<'a>),
    Many(Vec<JsonId<'a>>),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AttributesDoc {
    #[serde(default)]
    memory: Option<String>,
    #[serde(default)]
    constant_destination_memory: Option<String>,
    #[serde(default)]
    alignment: Option<u64>,
    #[serde(default)]
    external: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_from(text: &str) -> Result<Rules> {
        let dir = std::env::temp_dir().join(format!("memplan-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("rules-{}.json", text.len()));
        std::fs::write(&path, text).unwrap();
        Rules::read(&path)
    }

    #[test]
    fn specificity_then_file_order_later_keys_win() {
        // Written most specific first: the resolver must still apply them least specific
        // first, so the id+type rule wins memory and the id rule's alignment survives.
        let rules = rules_from(
            r#"{"rules": [
              {"type": "constant", "id": ["w", 7], "attributes": {"memory": "DTCM"}},
              {"id": "w", "attributes": {"memory": "SRAM", "alignment": 64}},
              {"type": "constant", "attributes": {"memory": "MRAM", "constant_destination_memory": "SRAM"}},
              {"type": "*", "attributes": {"memory": "PSRAM", "alignment": 8}},
              {"type": "constant", "attributes": {"alignment": 32}}
            ]}"#,
        )
        .unwrap();
        let resolver = rules.resolver();
        let w = resolver.resolve(TensorKind::Constant, "w");
        assert_eq!(w.memory.as_deref(), Some("DTCM"));
        assert_eq!(w.alignment, Some(64));
        assert_eq!(w.constant_destination_memory.as_deref(), Some("SRAM"));
        let other = resolver.resolve(TensorKind::Constant, "b");
        assert_eq!(other.memory.as_deref(), Some("MRAM"));
        assert_eq!(other.alignment, Some(32));
        // An id+type rule does not match another kind with that id.
        let seven = resolver.resolve(TensorKind::Intermediate, "7");
        assert_eq!(seven.memory.as_deref(), Some("PSRAM"));
        assert_eq!(seven.alignment, Some(8));
    }

    #[test]
    fn scratch_type_matches_inputs_outputs_and_intermediates() {
        let rules =
            rules_from(r#"[{"type": "scratch", "attributes": {"memory": "DTCM"}}]"#).unwrap();
        let resolver = rules.resolver();
        for kind in [
            TensorKind::Input,
            TensorKind::Output,
            TensorKind::Intermediate,
        ] {
            assert_eq!(resolver.resolve(kind, "x").memory.as_deref(), Some("DTCM"));
        }
        assert_eq!(resolver.resolve(TensorKind::Persistent, "x").memory, None);
    }

    #[test]
    fn external_comes_from_rules_over_the_kinds_and_from_plan_ids_over_rules() {
        let mut rules = rules_from(
            r#"[{"type": "input", "id": "frame", "attributes": {"external": false}},
                {"id": "logits", "attributes": {"external": true}}]"#,
        )
        .unwrap();
        rules.external_io.kinds = vec![TensorKind::Input];
        let resolver = rules.resolver();
        assert_eq!(
            resolver.resolve(TensorKind::Input, "x").external,
            Some(true)
        );
        assert_eq!(
            resolver.resolve(TensorKind::Input, "frame").external,
            Some(false)
        );
        assert_eq!(
            resolver
                .resolve(TensorKind::Intermediate, "logits")
                .external,
            Some(true)
        );
        assert_eq!(resolver.resolve(TensorKind::Output, "y").external, None);
        rules.external_io.ids = vec!["frame".to_string()];
        let resolver = rules.resolver();
        assert_eq!(
            resolver.resolve(TensorKind::Input, "frame").external,
            Some(true)
        );
    }

    #[test]
    fn bad_rules_name_the_rule() {
        let error = rules_from(r#"[{"type": "weights", "attributes": {}}]"#).unwrap_err();
        assert!(
            error.message.contains("rule 0: unknown type"),
            "{}",
            error.message
        );
        let error = rules_from(r#"[{}, {"attributes": {"alignment": 24}}]"#).unwrap_err();
        assert!(
            error.message.contains("rule 1: alignment 24"),
            "{}",
            error.message
        );
        let error = rules_from(r#"[{"attributes": {"memroy": "X"}}]"#).unwrap_err();
        assert!(error.message.contains(":1:"), "{}", error.message);
        assert!(error.message.contains("unknown field"), "{}", error.message);
    }
}
