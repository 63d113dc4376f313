//! The planner manifest: what a plugin's planners are (name, version, one-line description)
//! and the plugin ABI it was built against, written by `export_planners!` into a section of
//! the plugin file of its own, where the host reads it *without loading the file*. Loading a
//! library runs its constructors; memplan loads a third-party file only inside the sandboxed
//! worker that runs its planner, and lists it (`memplan planners`) and selects it
//! (`--planner NAME`) by its manifest alone.
//!
//! Format 2: [`MANIFEST_MAGIC`], the ABI version and `\n`, then one line per planner: name,
//! tab, version, tab, description, `\n` (tabs and line breaks inside a field are written as
//! spaces). Format 1, names only (one per line after `memplan-planners/1\n`), is still read.
//!
//! A C planner's manifest (written by `MEMPLAN_MANIFEST` of `memplan_planner.h`, see
//! [`crate::c_abi`]) is format 2 with the ABI line `c ` and the C ABI version (`c 1.0`), and a
//! fourth field on each planner line: tab, the symbol of the planner's entry function. A host
//! that predates C planners reads `c 1.0` as a plugin ABI it does not speak and refuses the file
//! saying so.

/// The section's name in an ELF file (Linux and other Unix systems).
pub const MANIFEST_SECTION: &str = ".memplan_planners";

/// The bytes a manifest starts with; the digit is the format's version.
pub const MANIFEST_MAGIC: &[u8] = b"memplan-planners/2\n";

/// The first bytes of a manifest of format 1 (names only).
const MANIFEST_MAGIC_1: &[u8] = b"memplan-planners/1\n";

/// What a manifest says about one planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredPlanner {
    pub name: String,
    /// Empty in a manifest of format 1.
    pub version: String,
    /// Empty in a manifest of format 1.
    pub description: String,
    /// A C planner's entry function (a `memplan_pack_fn`), by its symbol; empty for a Rust
    /// planner (its entry is in the root module).
    pub entry: String,
}

/// Which interface a plugin file's planners are built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannerInterface {
    /// The Rust plugin ABI (abi_stable, `export_planners!`): the file's root module lists its
    /// planners.
    Rust,
    /// The C interface of `memplan_planner.h` ([`crate::c_abi`]): each planner is a packer
    /// function the manifest names.
    C,
}

/// A plugin file's manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub interface: PlannerInterface,
    /// The version of the interface the file was built against: the plugin ABI
    /// ([`crate::ABI_VERSION`]; `None` in a manifest of format 1) or the C ABI
    /// ([`crate::c_abi::C_ABI_VERSION`]).
    pub abi_version: Option<String>,
    pub planners: Vec<DeclaredPlanner>,
}

impl Manifest {
    /// The planners' names, in manifest order.
    pub fn names(&self) -> Vec<String> {
        self.planners
            .iter()
            .map(|planner| planner.name.clone())
            .collect()
    }
}

/// The length of the manifest of `planners` (name, version, description each), for
/// `export_planners!`.
#[doc(hidden)]
pub const fn __manifest_len(planners: &[[&str; 3]]) -> usize {
    let mut length = MANIFEST_MAGIC.len() + crate::ABI_VERSION.len() + 1;
    let mut index = 0;
    while index < planners.len() {
        length +=
            planners[index][0].len() + planners[index][1].len() + planners[index][2].len() + 3;
        index += 1;
    }
    length
}

/// Copies `text` into `bytes` at `at`, tabs and line breaks as spaces; returns the new end.
const fn put(bytes: &mut [u8], mut at: usize, text: &[u8], end: u8) -> usize {
    let mut byte = 0;
    while byte < text.len() {
        bytes[at] = match text[byte] {
            b'\t' | b'\n' | b'\r' => b' ',
            other => other,
        };
        at += 1;
        byte += 1;
    }
    bytes[at] = end;
    at + 1
}

/// The manifest of `planners`, `N` = [`__manifest_len`] bytes (for `export_planners!`).
#[doc(hidden)]
pub const fn __manifest<const N: usize>(planners: &[[&str; 3]]) -> [u8; N] {
    let mut bytes = [0u8; N];
    let mut at = 0;
    while at < MANIFEST_MAGIC.len() {
        bytes[at] = MANIFEST_MAGIC[at];
        at += 1;
    }
    at = put(&mut bytes, at, crate::ABI_VERSION.as_bytes(), b'\n');
    let mut index = 0;
    while index < planners.len() {
        at = put(&mut bytes, at, planners[index][0].as_bytes(), b'\t');
        at = put(&mut bytes, at, planners[index][1].as_bytes(), b'\t');
        at = put(&mut bytes, at, planners[index][2].as_bytes(), b'\n');
        index += 1;
    }
    bytes
}

/// The manifest in a manifest section's bytes; `None` when they are not one (wrong magic, not
/// UTF-8, a line not ended by `\n`, a planner line without its three fields). Trailing zero
/// bytes (section padding) are ignored.
pub fn parse_manifest(section: &[u8]) -> Option<Manifest> {
    let (format, body) = match section.strip_prefix(MANIFEST_MAGIC) {
        Some(body) => (2, body),
        None => (1, section.strip_prefix(MANIFEST_MAGIC_1)?),
    };
    let end = body
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |last| last + 1);
    let text = std::str::from_utf8(&body[..end]).ok()?;
    let mut lines: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        text.strip_suffix('\n')?.split('\n').collect()
    };
    if format == 1 {
        let planners = lines
            .into_iter()
            .map(|name| DeclaredPlanner {
                name: name.to_string(),
                version: String::new(),
                description: String::new(),
                entry: String::new(),
            })
            .collect();
        return Some(Manifest {
            interface: PlannerInterface::Rust,
            abi_version: None,
            planners,
        });
    }
    if lines.is_empty() {
        return None;
    }
    let abi_line = lines.remove(0);
    let (interface, abi_version) =
        match abi_line.strip_prefix(crate::c_abi::MANIFEST_INTERFACE_PREFIX) {
            Some(version) => (PlannerInterface::C, version),
            None => (PlannerInterface::Rust, abi_line),
        };
    let planners = lines
        .into_iter()
        .map(|line| match interface {
            PlannerInterface::Rust => {
                let mut fields = line.splitn(3, '\t');
                Some(DeclaredPlanner {
                    name: fields.next()?.to_string(),
                    version: fields.next()?.to_string(),
                    description: fields.next()?.to_string(),
                    entry: String::new(),
                })
            }
            PlannerInterface::C => {
                let mut fields = line.split('\t');
                let planner = DeclaredPlanner {
                    name: fields.next()?.to_string(),
                    version: fields.next()?.to_string(),
                    description: fields.next()?.to_string(),
                    entry: fields.next()?.to_string(),
                };
                fields.next().is_none().then_some(planner)
            }
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Manifest {
        interface,
        abi_version: Some(abi_version.to_string()),
        planners,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip() {
        const PLANNERS: &[[&str; 3]] = &[
            ["exact", "1.2.0", "branch and bound"],
            ["portfolio", "0.1.0", "keeps\tthe\nbest"],
        ];
        const BYTES: [u8; __manifest_len(PLANNERS)] = __manifest(PLANNERS);
        assert_eq!(&BYTES[..MANIFEST_MAGIC.len()], MANIFEST_MAGIC);
        let manifest = parse_manifest(&BYTES).unwrap();
        assert_eq!(manifest.abi_version.as_deref(), Some(crate::ABI_VERSION));
        assert_eq!(manifest.names(), vec!["exact", "portfolio"]);
        assert_eq!(manifest.planners[0].version, "1.2.0");
        assert_eq!(manifest.planners[1].description, "keeps the best");
        let mut padded = BYTES.to_vec();
        padded.extend([0; 5]);
        assert_eq!(parse_manifest(&padded), parse_manifest(&BYTES));
        // Format 1: names only.
        let old = parse_manifest(b"memplan-planners/1\nexact\n").unwrap();
        assert_eq!(old.names(), vec!["exact".to_string()]);
        assert_eq!(old.abi_version, None);
        assert_eq!(
            parse_manifest(b"memplan-planners/1\n").unwrap().planners,
            vec![]
        );
        assert_eq!(parse_manifest(b"memplan-planners/3\nexact\n"), None);
        assert_eq!(parse_manifest(b"memplan-planners/1\nexact"), None);
        assert_eq!(parse_manifest(b"memplan-planners/2\n1.0.0\nexact\n"), None);
    }

    #[test]
    fn c_manifests_name_the_c_abi_and_each_entry_function() {
        // What MEMPLAN_MANIFEST of memplan_planner.h writes, with the C string's final NUL.
        let section =
            b"memplan-planners/2\nc 1.0\nc-first-fit\t1.2.0\tfirst fit\tfirst_fit_pack\n\0";
        let manifest = parse_manifest(section).unwrap();
        assert_eq!(manifest.interface, PlannerInterface::C);
        assert_eq!(manifest.abi_version.as_deref(), Some("1.0"));
        assert_eq!(
            manifest.planners,
            vec![DeclaredPlanner {
                name: "c-first-fit".to_string(),
                version: "1.2.0".to_string(),
                description: "first fit".to_string(),
                entry: "first_fit_pack".to_string(),
            }]
        );
        // A C planner line without its entry, or with a fifth field, is not a manifest.
        assert_eq!(
            parse_manifest(b"memplan-planners/2\nc 1.0\nc-first-fit\t1.2.0\tfirst fit\n"),
            None
        );
        assert_eq!(
            parse_manifest(b"memplan-planners/2\nc 1.0\na\t1\td\tf\tg\n"),
            None
        );
        // A Rust manifest's description may hold what looks like a fourth field.
        let rust = parse_manifest(b"memplan-planners/2\n1.0.0\nexact\t1\ta\tb\n").unwrap();
        assert_eq!(rust.interface, PlannerInterface::Rust);
        assert_eq!(rust.planners[0].description, "a\tb");
        assert_eq!(rust.planners[0].entry, "");
    }
}
