//! Which tensors live in buffers the caller owns (*external* tensors) rather than in an arena,
//! as the command line and a plan file say; per tensor, attribute rules say it too
//! (`"external": true`, [`super::rules`]).
//!
//! `--external-io inputs,outputs,constants` names kinds: the graph's inputs (a camera's DMA
//! frame buffer), its outputs, its constants (weights the firmware keeps where it loaded them,
//! what other planners call parameters). Rules override the kinds either way; the ids a plan
//! file lists are external whatever the rules say, so that `memplan check` sees the plan as it
//! was made.

use memplan_plugin_api::TensorKind;

use crate::error::{Error, Result};

/// Externality from outside the rules file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalIo {
    /// Kinds whose tensors are external unless a rule says otherwise (`--external-io`).
    pub kinds: Vec<TensorKind>,
    /// Ids that are external whatever the rules say (a plan file's `external` list).
    pub ids: Vec<String>,
}

/// The words `--external-io` takes, and the kind each names.
const KIND_WORDS: [(&str, TensorKind); 3] = [
    ("inputs", TensorKind::Input),
    ("outputs", TensorKind::Output),
    ("constants", TensorKind::Constant),
];

/// The kinds of an `--external-io` value: words from [`KIND_WORDS`] separated by commas, each
/// at most once; `none` for no kind.
pub fn parse_kinds(spec: &str) -> Result<Vec<TensorKind>> {
    if spec.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut kinds = Vec::new();
    for word in spec.split(',').map(str::trim) {
        let Some(&(_, kind)) = KIND_WORDS.iter().find(|(name, _)| *name == word) else {
            return Err(Error::input(format!(
                "--external-io `{spec}`: unknown kind `{word}`; give inputs, outputs and/or \
                 constants separated by commas (e.g. --external-io inputs,outputs), or none; \
                 single tensors are made external with an attribute rule \
                 {{\"id\": ID, \"attributes\": {{\"external\": true}}}}"
            )));
        };
        if kinds.contains(&kind) {
            return Err(Error::input(format!(
                "--external-io `{spec}`: `{word}` is listed twice"
            )));
        }
        kinds.push(kind);
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_words_separated_by_commas() {
        assert_eq!(
            parse_kinds("inputs, outputs").unwrap(),
            vec![TensorKind::Input, TensorKind::Output]
        );
        assert_eq!(
            parse_kinds("constants").unwrap(),
            vec![TensorKind::Constant]
        );
        assert!(parse_kinds("none").unwrap().is_empty());
        let unknown = parse_kinds("inputs,weights").unwrap_err();
        assert!(
            unknown.message.contains("unknown kind `weights`"),
            "{}",
            unknown.message
        );
        let twice = parse_kinds("inputs,inputs").unwrap_err();
        assert!(twice.message.contains("listed twice"), "{}", twice.message);
        assert!(parse_kinds("").is_err());
    }
}
