//! Placement helpers several stages share, below all of them (they import nothing of the
//! pipeline's): the sweep that finds byte ranges sharing bytes while both are live
//! ([`sweep`]: analysis's check of a model's fixed placements, the checker's contract 5,
//! the embedded offline plan's check), and TensorFlow Lite Micro's greedy planner simulated
//! ([`tflm_greedy`]: the checker's and the renderer's TFLM head).

pub mod sweep;
pub mod tflm_greedy;
