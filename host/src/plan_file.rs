//! The plan file format (`{prefix}_plan.json`): written by emit, read by `memplan check`.
//! Tensors are named by id and memories by name so that other tools can write plans too.
