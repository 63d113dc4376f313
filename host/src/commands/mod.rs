//! One module per subcommand, each wiring the pipeline stages for it.

pub mod bench;
pub mod check;
pub mod plan;
pub mod planners;
pub mod select;
