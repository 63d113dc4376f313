//! One module per subcommand, each wiring the pipeline stages for it.

pub mod check;
pub mod plan;
pub mod planners;
