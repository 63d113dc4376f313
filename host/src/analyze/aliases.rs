//! Alias chains: every tensor's root (the end of its `alias_of` chain, a tensor with a slot of
//! its own) and its accumulated byte offset inside that root.
//!
//! One iterative walk per chain with three-state marking, so the whole pass is O(n) however
//! long the chains, and a cycle is found the moment a walk meets a tensor still on its own path.

use crate::error::{Error, Result};
use crate::input::Model;

/// Root and offset of every tensor (a non-alias is its own root at offset 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasRoots {
    pub root: Vec<u32>,
    pub offset: Vec<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Unvisited,
    OnPath,
    Done,
}

/// Resolves every alias chain. A cycle is an input error naming the tensors on it; an alias
/// that would reach past the end of its root, or whose root has another arena role, too.
pub fn resolve(model: &Model) -> Result<AliasRoots> {
    let n = model.tensors.len();
    let mut root: Vec<u32> = (0..n as u32).collect();
    let mut offset = vec![0u64; n];
    let mut mark = vec![Mark::Unvisited; n];
    let mut path: Vec<u32> = Vec::new();
    let file = model.path.display();
    for start in 0..n {
        if mark[start] != Mark::Unvisited {
            continue;
        }
        // Walk down the chain until a resolved tensor or a root.
        path.clear();
        let mut current = start as u32;
        loop {
            match mark[current as usize] {
                Mark::Done => break,
                Mark::OnPath => {
                    let cycle_start = path.iter().position(|&t| t == current).unwrap_or(0);
                    let names: Vec<String> = path[cycle_start..]
                        .iter()
                        .chain(std::iter::once(&current))
                        .map(|&t| format!("'{}'", model.tensors[t as usize].id))
                        .collect();
                    return Err(Error::input(format!(
                        "{file}: alias cycle {}; an alias chain must end at a tensor with its own slot (remove one `alias_of`)",
                        names.join(" -> ")
                    )));
                }
                Mark::Unvisited => {}
            }
            mark[current as usize] = Mark::OnPath;
            path.push(current);
            match model.tensors[current as usize].alias_of {
                Some(alias) => current = alias.target,
                None => break,
            }
        }
        // Unwind: each tensor takes its target's (now final) root and adds its own offset.
        for &t in path.iter().rev() {
            let tensor = &model.tensors[t as usize];
            if let Some(alias) = tensor.alias_of {
                let target = alias.target as usize;
                root[t as usize] = root[target];
                offset[t as usize] = offset[target].checked_add(alias.offset).ok_or_else(|| {
                    Error::input(format!(
                        "{file}: tensor '{}': alias offsets along its chain overflow 64 bits",
                        tensor.id
                    ))
                })?;
            }
            mark[t as usize] = Mark::Done;
        }
    }
    check_views(model, &root, &offset)?;
    Ok(AliasRoots { root, offset })
}

/// An alias must fit inside its root's slot, share its arena role, and have no slot of its
/// own to pin.
fn check_views(model: &Model, root: &[u32], offset: &[u64]) -> Result<()> {
    let file = model.path.display();
    for (index, tensor) in model.tensors.iter().enumerate() {
        if tensor.alias_of.is_none() {
            continue;
        }
        let root_tensor = &model.tensors[root[index] as usize];
        let at = |what: String| {
            Error::input(format!(
                "{file}: tensor '{}' (alias of '{}'): {what}",
                tensor.id, root_tensor.id
            ))
        };
        if offset[index].saturating_add(tensor.size) > root_tensor.size {
            return Err(at(format!(
                "bytes {}..{} of the view lie outside its root's {} bytes; fix `alias_offset` or the sizes",
                offset[index],
                offset[index].saturating_add(tensor.size),
                root_tensor.size
            )));
        }
        if tensor.kind.role() != root_tensor.kind.role() {
            return Err(at(format!(
                "a {} tensor cannot be a view of a {} tensor (they live in different arenas)",
                tensor.kind.as_str(),
                root_tensor.kind.as_str()
            )));
        }
        if tensor.fixed_offset.is_some() {
            return Err(at(
                "an alias has no slot of its own; put `fixed_offset` on its root instead".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{ModelAlias, Tensor};
    use memplan_plugin_api::TensorKind;

    fn model(aliases: &[(usize, Option<(u32, u64)>)], sizes: &[u64]) -> Model {
        let mut model = Model {
            path: "m.json".into(),
            ..Model::default()
        };
        for (i, &size) in sizes.iter().enumerate() {
            model
                .tensors
                .push(Tensor::new(format!("t{i}"), TensorKind::Intermediate, size));
        }
        for &(i, alias) in aliases {
            model.tensors[i].alias_of = alias.map(|(target, offset)| ModelAlias { target, offset });
        }
        model
    }

    #[test]
    fn chains_accumulate_offsets_to_their_root() {
        // t3 -> t1 (+8) -> t0 (+16); t2 -> t3 (+4); t4 on its own.
        let m = model(
            &[(1, Some((0, 16))), (3, Some((1, 8))), (2, Some((3, 4)))],
            &[64, 32, 4, 16, 8],
        );
        let roots = resolve(&m).unwrap();
        assert_eq!(roots.root, vec![0, 0, 0, 0, 4]);
        assert_eq!(roots.offset, vec![0, 16, 28, 24, 0]);
    }

    #[test]
    fn cycles_are_reported_with_their_tensors() {
        let m = model(
            &[(0, Some((1, 0))), (1, Some((2, 0))), (2, Some((1, 0)))],
            &[8, 8, 8],
        );
        let error = resolve(&m).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(
            error.message.contains("alias cycle 't1' -> 't2' -> 't1'"),
            "{}",
            error.message
        );
        let m = model(&[(0, Some((0, 0)))], &[8]);
        assert!(resolve(&m).unwrap_err().message.contains("'t0' -> 't0'"));
    }

    #[test]
    fn views_must_fit_their_root_and_share_its_role() {
        let m = model(&[(1, Some((0, 60)))], &[64, 8]);
        let error = resolve(&m).unwrap_err();
        assert!(
            error.message.contains("tensor 't1' (alias of 't0')"),
            "{}",
            error.message
        );
        assert!(error.message.contains("outside"), "{}", error.message);
        let mut m = model(&[(1, Some((0, 0)))], &[64, 8]);
        m.tensors[0].kind = TensorKind::Persistent;
        assert!(resolve(&m)
            .unwrap_err()
            .message
            .contains("different arenas"));
    }
}
