//! The planner manifest: the names of a plugin's planners, written by `export_planners!` into
//! a section of the plugin file of its own, where the host reads them *without loading the
//! file*. Loading a library runs its constructors before any check; with the manifest, a run
//! that selects `--planner NAME` loads only the files that say they provide NAME.
//!
//! Format: [`MANIFEST_MAGIC`], then each planner's name followed by `\n`. A file without the
//! section (built against an older plugin-api) is loaded as before.

/// The section's name in an ELF file (Linux and other Unix systems).
pub const MANIFEST_SECTION: &str = ".memplan_planners";

/// The bytes a manifest starts with; the digit is the format's version.
pub const MANIFEST_MAGIC: &[u8] = b"memplan-planners/1\n";

/// The length of the manifest of planners `names` (for `export_planners!`).
#[doc(hidden)]
pub const fn __manifest_len(names: &[&str]) -> usize {
    let mut length = MANIFEST_MAGIC.len();
    let mut index = 0;
    while index < names.len() {
        length += names[index].len() + 1;
        index += 1;
    }
    length
}

/// The manifest of planners `names`, `N` = [`__manifest_len`] bytes (for `export_planners!`).
#[doc(hidden)]
pub const fn __manifest<const N: usize>(names: &[&str]) -> [u8; N] {
    let mut bytes = [0u8; N];
    let mut at = 0;
    while at < MANIFEST_MAGIC.len() {
        bytes[at] = MANIFEST_MAGIC[at];
        at += 1;
    }
    let mut index = 0;
    while index < names.len() {
        let name = names[index].as_bytes();
        let mut byte = 0;
        while byte < name.len() {
            bytes[at] = name[byte];
            at += 1;
            byte += 1;
        }
        bytes[at] = b'\n';
        at += 1;
        index += 1;
    }
    bytes
}

/// The planner names of a manifest section's bytes; `None` when they are not a manifest
/// (wrong magic, not UTF-8, a name not ended by `\n`). Trailing zero bytes (section padding)
/// are ignored.
pub fn parse_manifest(section: &[u8]) -> Option<Vec<String>> {
    let body = section.strip_prefix(MANIFEST_MAGIC)?;
    let end = body
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |last| last + 1);
    let text = std::str::from_utf8(&body[..end]).ok()?;
    if text.is_empty() {
        return Some(Vec::new());
    }
    let names = text.strip_suffix('\n')?;
    Some(names.split('\n').map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip() {
        const NAMES: &[&str] = &["exact", "portfolio"];
        const BYTES: [u8; __manifest_len(NAMES)] = __manifest(NAMES);
        assert_eq!(&BYTES[..MANIFEST_MAGIC.len()], MANIFEST_MAGIC);
        assert_eq!(
            parse_manifest(&BYTES),
            Some(vec!["exact".into(), "portfolio".into()])
        );
        let mut padded = BYTES.to_vec();
        padded.extend([0; 5]);
        assert_eq!(parse_manifest(&padded), parse_manifest(&BYTES));
        assert_eq!(parse_manifest(MANIFEST_MAGIC), Some(Vec::new()));
        assert_eq!(parse_manifest(b"memplan-planners/2\nexact\n"), None);
        assert_eq!(parse_manifest(b"memplan-planners/1\nexact"), None);
    }
}
