//! Reading a plugin file's planner manifest (see `memplan_plugin_api::manifest`) from its ELF
//! section headers, without loading the file: so that a run selecting `--planner NAME` loads
//! only the files that say they provide NAME, and no other file's constructors run.
//!
//! Only what finding one section needs is read: the ELF header, the section headers and the
//! section-name table. Anything unexpected (not ELF, extended section numbering, sizes beyond
//! the caps below) means "no manifest", and the file is loaded as before.

use std::fs::File;
use std::os::unix::fs::FileExt;

use memplan_plugin_api::manifest::{parse_manifest, Manifest, MANIFEST_SECTION};

/// Larger section-name tables or manifests are not read (a plugin's are a few hundred bytes).
const NAME_TABLE_CAP: u64 = 1 << 20;
const MANIFEST_CAP: u64 = 1 << 16;

/// The manifest of `file`; `None` when it has none.
pub fn declared_planners(file: &File) -> Option<Manifest> {
    parse_manifest(&section_named(file, MANIFEST_SECTION, MANIFEST_CAP)?)
}

/// Larger dynamic string tables are not read (a plugin's are a few kilobytes).
const DYNAMIC_NAMES_CAP: u64 = 16 << 20;

/// Whether `file` exports abi_stable's root-module loader (names it in its dynamic string
/// table), that is: whether it is a memplan plugin, read without loading it. A third-party
/// plugin without a manifest is refused saying so; any other library is skipped quietly.
pub fn names_the_plugin_loader(file: &File) -> bool {
    let symbol = memplan_plugin_api::export::LOADER_SYMBOL.as_bytes();
    section_named(file, ".dynstr", DYNAMIC_NAMES_CAP)
        .is_some_and(|names| names.split(|&byte| byte == 0).any(|name| name == symbol))
}

/// The bytes of the section of `file` called `wanted`, when there is one of at most `cap`
/// bytes.
fn section_named(file: &File, wanted: &str, cap: u64) -> Option<Vec<u8>> {
    let elf = ElfLayout::read(file)?;
    let names = elf.section(file, elf.name_table_index)?;
    let names = read_capped(file, names.offset, names.size, NAME_TABLE_CAP)?;
    for index in 0..elf.section_count {
        let section = elf.section(file, index)?;
        let name = names.get(section.name as usize..)?;
        let name = &name[..name.iter().position(|&byte| byte == 0)?];
        if name == wanted.as_bytes() {
            return read_capped(file, section.offset, section.size, cap);
        }
    }
    None
}

/// Where an ELF file's section headers are and how to read them.
struct ElfLayout {
    wide: bool,
    little_endian: bool,
    headers_at: u64,
    header_size: u64,
    section_count: u16,
    name_table_index: u16,
}

/// The fields of one section header that finding the manifest needs.
struct SectionHeader {
    name: u32,
    offset: u64,
    size: u64,
}

impl ElfLayout {
    fn read(file: &File) -> Option<ElfLayout> {
        let mut header = [0u8; 64];
        file.read_exact_at(&mut header, 0).ok()?;
        if header[..4] != *b"\x7fELF" {
            return None;
        }
        let wide = match header[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let little_endian = match header[5] {
            1 => true,
            2 => false,
            _ => return None,
        };
        let field = |at: usize, width: usize| read_uint(&header[at..at + width], little_endian);
        let (headers_at, rest) = if wide {
            (field(0x28, 8), 0x3A)
        } else {
            (field(0x20, 4), 0x2E)
        };
        Some(ElfLayout {
            wide,
            little_endian,
            headers_at,
            header_size: field(rest, 2),
            section_count: field(rest + 2, 2) as u16,
            name_table_index: field(rest + 4, 2) as u16,
        })
    }

    fn section(&self, file: &File, index: u16) -> Option<SectionHeader> {
        if index >= self.section_count {
            return None;
        }
        let mut header = [0u8; 64];
        let length = if self.wide { 64 } else { 40 };
        if self.header_size < length as u64 {
            return None;
        }
        let at = self
            .headers_at
            .checked_add(u64::from(index) * self.header_size)?;
        file.read_exact_at(&mut header[..length], at).ok()?;
        let field =
            |at: usize, width: usize| read_uint(&header[at..at + width], self.little_endian);
        let (offset, size) = if self.wide {
            (field(0x18, 8), field(0x20, 8))
        } else {
            (field(0x10, 4), field(0x14, 4))
        };
        Some(SectionHeader {
            name: field(0, 4) as u32,
            offset,
            size,
        })
    }
}

fn read_uint(bytes: &[u8], little_endian: bool) -> u64 {
    let fold = |value: u64, &byte: &u8| (value << 8) | u64::from(byte);
    if little_endian {
        bytes.iter().rev().fold(0, fold)
    } else {
        bytes.iter().fold(0, fold)
    }
}

fn read_capped(file: &File, offset: u64, size: u64, cap: u64) -> Option<Vec<u8>> {
    if size > cap {
        return None;
    }
    let mut bytes = vec![0u8; size as usize];
    file.read_exact_at(&mut bytes, offset).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_manifest_of_a_shipped_plugin_and_none_elsewhere() {
        // The test binary is an ELF file without a manifest; a file that is not ELF has none.
        let own = File::open(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(declared_planners(&own), None);
        let text = File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
        assert_eq!(declared_planners(&text), None);
    }
}
