//! What memplan prints on stdout, in one place: the plan summary (`memplan plan`), the check
//! report (`memplan check`) and the bench tables (`memplan bench`), each as text and JSON
//! (and CSV for bench). Reports read the results of the stages; they compute nothing new.

pub mod bench;
pub mod check;
pub mod external;
mod order;
pub mod plan;
