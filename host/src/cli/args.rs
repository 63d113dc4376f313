//! The command line as clap parses it (the contract README.md and docs/ describe): types only, importing
//! nothing from the rest of memplan. [`super::config::resolve`] checks them and turns them
//! into the configuration the commands run with.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "memplan",
    version = version_line(),
    about = "Plan tensor memory for microcontrollers, with pluggable planners"
)]
pub struct Cli {
    /// More log output on stderr (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// What `memplan --version` prints after the name: memplan's version, the plugin ABI version
/// plugins must be built against, and the commit it was built from (`unknown` for a build from
/// a package without git history; see `host/build.rs`).
pub fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (plugin ABI {}, commit {})",
            env!("CARGO_PKG_VERSION"),
            memplan_plugin_api::ABI_VERSION,
            env!("MEMPLAN_COMMIT")
        )
    })
}

/// The logging flags, which an `--isolate` worker inherits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Verbosity {
    pub verbose: u8,
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Plan a model's memory, check the plan and write C sources.
    Plan(PlanArgs),
    /// List the planners found on the plugin search path.
    Planners(PlannersArgs),
    /// Check a plan file against a model.
    Check(CheckArgs),
    /// Compare planners: arena height, lower bound, ratio and planning time per input.
    Bench(BenchArgs),
    /// Print shell completions for memplan (bash, zsh, fish, elvish, powershell) on stdout.
    ///
    /// bash: `memplan completions bash > ~/.local/share/bash-completion/completions/memplan`;
    /// zsh: into a directory of `$fpath` as `_memplan`; fish: into
    /// `~/.config/fish/completions/memplan.fish`. The install script does this for its prefix.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print memplan's man page (roff) on stdout: `memplan man > memplan.1; man ./memplan.1`.
    Man,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Where to find plugins.
#[derive(Args, Debug, Clone, Default)]
pub struct PluginArgs {
    /// A directory searched for planner plugins before MEMPLAN_PLUGIN_PATH (repeatable).
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Load plugin files even when they or their directory are writable by group or others.
    #[arg(long = "allow-insecure-plugins")]
    pub allow_insecure_plugins: bool,
    /// Pin planner NAME to the plugin file with this SHA-256 (repeatable); no other file is
    /// loaded for it.
    #[arg(long = "plugin-sha256", value_name = "NAME=HEX")]
    pub plugin_sha256: Vec<String>,
    /// Lock file pinning planners to SHA-256s (JSON `{"NAME": "HEX"}`); default
    /// `memplan.lock` in the current directory when it exists.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
}

/// When planners run in a sandboxed child process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IsolateWhen {
    /// Every planner in memplan's process, with the user's rights.
    Never,
    /// Every planner in a sandboxed child process.
    Always,
    /// Planners from outside memplan's installation sandboxed, memplan's own in process.
    Auto,
}

/// `--isolate` and the limits of an isolated planner.
#[derive(Args, Debug, Clone)]
pub struct IsolationArgs {
    /// Run planners in a sandboxed child process (no files, network or processes; memory and
    /// CPU limits; time limit 600 s unless --timeout says otherwise), so that a crashing or
    /// untrusted plugin cannot take the host down or act with your rights. `--isolate` alone
    /// means `always`; the default `auto` sandboxes planners from outside memplan's
    /// installation.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "auto",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always"
    )]
    pub isolate: IsolateWhen,
    /// Memory a sandboxed planner may allocate: BYTES, may end in K/KiB, M/MiB or G/GiB
    /// (default: half of the machine's memory).
    #[arg(long = "plan-memory-limit", value_name = "BYTES")]
    pub plan_memory_limit: Option<String>,
}

/// The target and the constraints on its memories.
#[derive(Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// A built-in target (generic, apollo3_evb, apollo4p_evb, apollo510_evb) or a target JSON file.
    #[arg(long, value_name = "NAME|FILE")]
    pub target: Option<String>,
    /// Narrow a memory's budget: NAME=BYTES, BYTES may end in K/KiB or M/MiB (binary), e.g.
    /// `--memory SRAM=64K`; or a constraints FILE (JSON list of {name, max_size,
    /// arena_alignment}). Repeatable; later entries win.
    #[arg(long = "memory", value_name = "NAME=BYTES|FILE")]
    pub memory: Vec<String>,
    /// Attribute rules file (placement memory, constant staging, alignment, external).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Tensors of these kinds live in buffers the firmware owns and binds at run time, not in
    /// an arena: inputs, outputs and/or constants, separated by commas (rules may override).
    #[arg(long = "external-io", value_name = "KIND[,KIND...]")]
    pub external_io: Option<String>,
}

/// `--order`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderArg {
    Best,
    Keep,
}

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Model file: `.json` (memplan model), `.tflite`, or `.csv` (MiniMalloc).
    pub input: PathBuf,
    /// Planner(s) to run, by NAME; several separated by commas keep the smallest plan.
    #[arg(long, value_name = "NAME[,NAME...]", default_value = "portfolio")]
    pub planner: String,
    /// Planner options: a JSON object given to every planner, or NAME=JSON for planner NAME
    /// only (repeatable, e.g. `--planner-options 'greedy-bestfit={"fit":"first"}'`).
    #[arg(long = "planner-options", value_name = "[NAME=]JSON")]
    pub planner_options: Vec<String>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Prefix of emitted C symbols and file names.
    #[arg(long, default_value = "model")]
    pub prefix: String,
    /// Output directory.
    #[arg(long, default_value = "./memplan-out")]
    pub out: PathBuf,
    /// Do not define arena buffers; emit bind functions and sidecar `.bin` blobs instead.
    #[arg(long = "external-arenas")]
    pub external_arenas: bool,
    /// With a `.tflite` input, also write `{prefix}.tflite`: the model with memplan's plan as
    /// TensorFlow Lite Micro's offline plan (`OfflineMemoryAllocation` metadata).
    #[arg(long = "emit-tflite")]
    pub emit_tflite: bool,
    /// Operator order the plan holds for: `best` (the valid order with the lowest peak of live
    /// bytes; the firmware must run it) or `keep` (the stored order). Default: `best` with
    /// --emit-tflite (the written model carries the order), `keep` otherwise.
    #[arg(long, value_enum, value_name = "best|keep")]
    pub order: Option<OrderArg>,
    /// With a `.tflite` input that carries an offline plan (`OfflineMemoryAllocation`, e.g. one
    /// memplan wrote), plan it afresh instead of keeping those offsets as fixed placements.
    #[arg(long = "ignore-offline-plan")]
    pub ignore_offline_plan: bool,
    #[command(flatten)]
    pub isolation: IsolationArgs,
    /// Stop the planner after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub plugins: PluginArgs,
    /// Output on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct PlannersArgs {
    #[command(flatten)]
    pub plugins: PluginArgs,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The model the plan is for.
    pub input: PathBuf,
    /// The plan file (`{prefix}_plan.json` written by `memplan plan`), or a MiniMalloc solution
    /// CSV (`bench --solutions`; `.csv`). Without it, a `.tflite`
    /// model's own offline plan (`OfflineMemoryAllocation`) is checked against TensorFlow Lite
    /// Micro's lifetimes.
    pub plan: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// Output formats of `memplan bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchFormat {
    Text,
    Json,
    Csv,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Model files: `.json` (memplan model), `.tflite`, or `.csv` (MiniMalloc).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Planners to compare, by NAME, separated by commas.
    #[arg(long, value_name = "NAME[,NAME...]", default_value = "portfolio")]
    pub planner: String,
    /// Planner options: a JSON object given to every planner, or NAME=JSON for planner NAME
    /// only (repeatable, e.g. `--planner-options 'greedy-bestfit={"fit":"first"}'`).
    #[arg(long = "planner-options", value_name = "[NAME=]JSON")]
    pub planner_options: Vec<String>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Runs of each planner per input; the median time is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Stop a planner run after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub isolation: IsolationArgs,
    /// Also write each plan as a MiniMalloc solution, `DIR/{input file stem}.{planner}.csv`
    /// with the columns id,lower,upper,size,offset, to compare with other tools.
    #[arg(long, value_name = "DIR")]
    pub solutions: Option<PathBuf>,
    #[command(flatten)]
    pub plugins: PluginArgs,
    /// Output on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: BenchFormat,
}
