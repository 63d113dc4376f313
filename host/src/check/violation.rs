//! What the checker reports: one [`Violation`] per broken contract instance, each of its own
//! [`ViolationKind`], with a message written for whoever has to fix the planner.

use std::fmt;

use memplan_plugin_api::ArenaRole;
use serde::Serialize;

use crate::error::Error;

/// How many violations the text report shows before "and N more".
pub const SHOWN_IN_TEXT: usize = 20;

/// Which rule a plan broke. Each kind belongs to one contract of docs/plan-format.md
/// ("Contracts the checker enforces"); [`ViolationKind::contract`] gives its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    // Contract 1: one allocation per tensor, no unknown tensors.
    /// A tensor of the model has no allocation.
    MissingAllocation,
    /// A tensor has more than one allocation.
    DuplicateAllocation,
    /// An allocation names a tensor the model does not have.
    UnknownTensor,
    /// An allocation's offset disagrees with its binding's offset.
    OffsetMismatch,
    /// An allocation reserves a different number of bytes than the tensor has.
    SizeMismatch,
    /// An external tensor (in a buffer the caller owns) is placed in an arena.
    ExternalPlaced,

    // Contract 2: bound to an arena of the right role and memory, which exists.
    /// A tensor is bound to an arena whose role does not match its kind.
    WrongRole,
    /// A tensor is bound to another memory (or source memory) than the request pinned.
    WrongMemory,
    /// An arena or binding names a memory the target does not have.
    UnknownMemory,
    /// A binding's arena is not in the plan.
    MissingArena,
    /// The plan has two arenas of one role in one memory.
    DuplicateArena,

    // Contract 3: one source memory per arena.
    /// A slot's source memory differs from its arena's source memory.
    SlotSourceMismatch,
    /// A scratch or persistent arena claims a source memory other than its own memory.
    ArenaSourceMismatch,

    // Contract 4: slots inside their arena, aligned.
    /// `offset + size` is past the end of the arena.
    OutOfArena,
    /// An offset is not a multiple of the tensor's alignment.
    Misaligned,
    /// An arena's alignment is not a power of two, or below what its memory or slots need.
    BadArenaAlignment,
    /// A tensor with a fixed offset was placed elsewhere.
    FixedOffsetMoved,

    // Contract 5: no two live slots share bytes; aliases inside their root.
    /// Two tensors live at the same step share bytes of one arena.
    Overlap,
    /// An alias is not at its root's binding plus the view offset, or sticks out of the root.
    AliasMisplaced,

    // Contract 6: budgets and writable memories.
    /// The arenas in one memory exceed its budget.
    OverBudget,
    /// A scratch, persistent or staged constant arena is in a read-only memory.
    ReadOnlyMemory,
}

impl ViolationKind {
    /// Every kind, in contract order.
    pub const ALL: [ViolationKind; 21] = {
        use ViolationKind::*;
        [
            MissingAllocation,
            DuplicateAllocation,
            UnknownTensor,
            OffsetMismatch,
            SizeMismatch,
            ExternalPlaced,
            WrongRole,
            WrongMemory,
            UnknownMemory,
            MissingArena,
            DuplicateArena,
            SlotSourceMismatch,
            ArenaSourceMismatch,
            OutOfArena,
            Misaligned,
            BadArenaAlignment,
            FixedOffsetMoved,
            Overlap,
            AliasMisplaced,
            OverBudget,
            ReadOnlyMemory,
        ]
    };

    /// The number of the docs/plan-format.md contract this kind belongs to.
    pub fn contract(self) -> u8 {
        use ViolationKind::*;
        match self {
            MissingAllocation | DuplicateAllocation | UnknownTensor | OffsetMismatch
            | SizeMismatch | ExternalPlaced => 1,
            WrongRole | WrongMemory | UnknownMemory | MissingArena | DuplicateArena => 2,
            SlotSourceMismatch | ArenaSourceMismatch => 3,
            OutOfArena | Misaligned | BadArenaAlignment | FixedOffsetMoved => 4,
            Overlap | AliasMisplaced => 5,
            OverBudget | ReadOnlyMemory => 6,
        }
    }

    /// The name used in reports and in `--format json` (snake_case).
    pub fn as_str(self) -> &'static str {
        use ViolationKind::*;
        match self {
            MissingAllocation => "missing_allocation",
            DuplicateAllocation => "duplicate_allocation",
            UnknownTensor => "unknown_tensor",
            OffsetMismatch => "offset_mismatch",
            SizeMismatch => "size_mismatch",
            ExternalPlaced => "external_placed",
            WrongRole => "wrong_role",
            WrongMemory => "wrong_memory",
            UnknownMemory => "unknown_memory",
            MissingArena => "missing_arena",
            DuplicateArena => "duplicate_arena",
            SlotSourceMismatch => "slot_source_mismatch",
            ArenaSourceMismatch => "arena_source_mismatch",
            OutOfArena => "out_of_arena",
            Misaligned => "misaligned",
            BadArenaAlignment => "bad_arena_alignment",
            FixedOffsetMoved => "fixed_offset_moved",
            Overlap => "overlap",
            AliasMisplaced => "alias_misplaced",
            OverBudget => "over_budget",
            ReadOnlyMemory => "read_only_memory",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tensor as reports name it: its id in the model and its human-readable name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorName {
    /// Index in the request; `None` for an id the model does not have.
    pub index: Option<u32>,
    pub id: String,
    pub name: String,
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor `{}` (\"{}\")", self.id, self.name)
    }
}

/// An arena as reports name it: role and memory names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArenaName {
    pub role: ArenaRole,
    pub memory: String,
    pub source_memory: String,
}

impl fmt::Display for ArenaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} arena in {}", self.role.as_str(), self.memory)?;
        if self.source_memory != self.memory {
            write!(f, " (source {})", self.source_memory)?;
        }
        Ok(())
    }
}

/// One broken contract instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    /// `kind.contract()`, repeated for readers of the JSON report.
    pub contract: u8,
    /// What is wrong, with the tensors, arena, offsets, sizes and lifetimes involved, and what
    /// the planner must do instead.
    pub message: String,
    /// The tensor at fault, if the violation is about one.
    pub tensor: Option<TensorName>,
    /// The other tensor involved (an overlap partner, an alias root, a duplicate).
    pub other_tensor: Option<TensorName>,
    /// The arena involved, if any.
    pub arena: Option<ArenaName>,
    /// The memory involved, for memory-level violations (budget, writability).
    pub memory: Option<String>,
}

impl Violation {
    pub fn new(kind: ViolationKind, message: impl Into<String>) -> Self {
        Violation {
            kind,
            contract: kind.contract(),
            message: message.into(),
            tensor: None,
            other_tensor: None,
            arena: None,
            memory: None,
        }
    }

    pub fn tensor(mut self, tensor: TensorName) -> Self {
        self.tensor = Some(tensor);
        self
    }

    pub fn other_tensor(mut self, tensor: TensorName) -> Self {
        self.other_tensor = Some(tensor);
        self
    }

    pub fn arena(mut self, arena: ArenaName) -> Self {
        self.arena = Some(arena);
        self
    }

    pub fn memory(mut self, memory: impl Into<String>) -> Self {
        self.memory = Some(memory.into());
        self
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, contract {}] {}",
            self.kind, self.contract, self.message
        )
    }
}

/// Every violation of one plan, in contract order. Never empty when returned by the checker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Violation> {
        self.0.iter()
    }

    /// Whether any violation is of `kind`.
    pub fn contains(&self, kind: ViolationKind) -> bool {
        self.0.iter().any(|violation| violation.kind == kind)
    }

    /// The text report: the first [`SHOWN_IN_TEXT`] violations, one per line prefixed with
    /// `  - `, then "and N more" when some were left out.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for violation in self.0.iter().take(SHOWN_IN_TEXT) {
            text.push_str("  - ");
            text.push_str(&violation.to_string());
            text.push('\n');
        }
        if self.0.len() > SHOWN_IN_TEXT {
            text.push_str(&format!(
                "  and {} more (use --format json to list them all)\n",
                self.0.len() - SHOWN_IN_TEXT
            ));
        }
        text
    }
}

impl From<Violations> for Error {
    fn from(violations: Violations) -> Error {
        let count = violations.len();
        Error::rejected(format!(
            "the plan was rejected by the checker ({count} violation{}):\n{}",
            if count == 1 { "" } else { "s" },
            violations.to_text().trim_end()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn numbered(count: usize) -> Violations {
        Violations(
            (0..count)
                .map(|n| Violation::new(ViolationKind::Overlap, format!("overlap number {n}")))
                .collect(),
        )
    }

    #[test]
    fn text_shows_twenty_then_the_rest_as_a_count() {
        let text = numbered(23).to_text();
        assert_eq!(text.lines().count(), 21, "{text}");
        assert!(text.contains("overlap number 19"), "{text}");
        assert!(!text.contains("overlap number 20"), "{text}");
        assert!(text.contains("and 3 more"), "{text}");
    }

    #[test]
    fn text_of_a_short_list_has_no_remainder_line() {
        let text = numbered(20).to_text();
        assert_eq!(text.lines().count(), 20, "{text}");
        assert!(!text.contains("more"), "{text}");
    }

    #[test]
    fn violations_become_a_rejected_error() {
        let error = Error::from(numbered(2));
        assert_eq!(error.kind, ErrorKind::Rejected);
        assert!(error.message.contains("2 violations"), "{}", error.message);
        assert!(
            error.message.contains("overlap number 1"),
            "{}",
            error.message
        );
    }

    #[test]
    fn json_names_kind_and_contract() {
        let violation = Violation::new(ViolationKind::OverBudget, "too big").memory("SRAM");
        let json = serde_json::to_value(&violation).unwrap();
        assert_eq!(json["kind"], "over_budget");
        assert_eq!(json["contract"], 6);
        assert_eq!(json["memory"], "SRAM");
        assert_eq!(json["tensor"], serde_json::Value::Null);
    }

    #[test]
    fn as_str_matches_the_serde_name_and_all_is_in_contract_order() {
        for kind in ViolationKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        let contracts: Vec<u8> = ViolationKind::ALL
            .iter()
            .map(|kind| kind.contract())
            .collect();
        assert!(
            contracts.windows(2).all(|pair| pair[0] <= pair[1]),
            "{contracts:?}"
        );
        assert_eq!(contracts.first(), Some(&1));
        assert_eq!(contracts.last(), Some(&6));
    }
}
