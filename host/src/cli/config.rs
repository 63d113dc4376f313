//! One step from the parsed command line to a checked configuration: every usage error (exit
//! 2) is found here, before any model is read or any plugin loaded. The commands run with what
//! this returns and never see a raw command-line string.

use std::path::PathBuf;

use super::args::{
    BenchArgs, BenchFormat, CheckArgs, Cli, Command, Format, IsolateWhen, IsolationArgs, PlanArgs,
    PlannersArgs, PluginArgs, TargetArgs, Verbosity,
};
use super::parse;
use crate::analyze::order::OrderMode;
use crate::cli::planner_options::PlannerOptionsByName;
use crate::emit;
use crate::error::{Error, Result};
use crate::input::{external_io, Constraints, ExternalIo};
use crate::registry::TrustPolicy;
use crate::render::{self, RenderOptions};
use crate::runner::{Isolation, RunLimits};

/// What to run, checked.
#[derive(Debug)]
pub struct Config {
    pub verbosity: Verbosity,
    pub task: Task,
}

#[derive(Debug)]
pub enum Task {
    Plan(PlanConfig),
    Planners(PlannersConfig),
    Check(CheckConfig),
    Bench(BenchConfig),
    /// `memplan completions SHELL`.
    Completions(clap_complete::Shell),
    /// `memplan man`.
    Man,
}

/// `--target`, `--memory` (parsed), `--rules` and `--external-io` (parsed); the files they
/// name are read by the read stage.
#[derive(Clone, Debug, Default)]
pub struct TargetConfig {
    pub target: Option<String>,
    pub constraints: Constraints,
    pub rules: Option<PathBuf>,
    /// `--external-io` kinds (and, for `check`, the plan file's external ids).
    pub external_io: ExternalIo,
}

/// Where plugins are searched and which may be loaded.
#[derive(Debug)]
pub struct PluginConfig {
    pub dirs: Vec<PathBuf>,
    pub trust: TrustPolicy,
}

#[derive(Debug)]
pub struct PlanConfig {
    pub input: PathBuf,
    pub planners: Vec<String>,
    pub options: PlannerOptionsByName,
    pub target: TargetConfig,
    /// The prefix, checked to be a C identifier, and `--external-arenas`.
    pub render: RenderOptions,
    pub out: PathBuf,
    pub isolate: Isolation,
    pub limits: RunLimits,
    pub plugins: PluginConfig,
    pub format: Format,
    /// `--order`, with its default resolved (`best` with `--emit-tflite`).
    pub order: crate::analyze::order::OrderMode,
    /// `--ignore-offline-plan`: drop a `.tflite` model's offline plan as it is read.
    pub ignore_offline_plan: bool,
}

#[derive(Debug)]
pub struct PlannersConfig {
    pub plugins: PluginConfig,
    pub format: Format,
}

#[derive(Debug)]
pub struct CheckConfig {
    pub input: PathBuf,
    /// `None`: check the offline plan the `.tflite` model carries.
    pub plan: Option<PathBuf>,
    pub target: TargetConfig,
    pub format: Format,
}

#[derive(Debug)]
pub struct BenchConfig {
    pub inputs: Vec<PathBuf>,
    pub planners: Vec<String>,
    pub options: PlannerOptionsByName,
    pub target: TargetConfig,
    pub runs: u32,
    pub limits: RunLimits,
    /// `--isolate`: which planners run in a sandboxed child process.
    pub isolate: Isolation,
    pub plugins: PluginConfig,
    pub format: BenchFormat,
    /// Draw a progress bar (not with `-q`; only on a terminal).
    pub show_progress: bool,
    /// `--solutions DIR`: where to write each plan as a MiniMalloc solution CSV.
    pub solutions: Option<PathBuf>,
}

/// Checks the command line and resolves it into a [`Config`].
pub fn resolve(cli: Cli) -> Result<Config> {
    let verbosity = Verbosity {
        verbose: cli.verbose,
        quiet: cli.quiet,
    };
    let task = match cli.command {
        Command::Plan(args) => Task::Plan(plan(args)?),
        Command::Planners(args) => Task::Planners(planners(args)?),
        Command::Check(args) => Task::Check(check(args)?),
        Command::Bench(args) => Task::Bench(bench(args, verbosity)?),
        Command::Completions { shell } => Task::Completions(shell),
        Command::Man => Task::Man,
    };
    Ok(Config { verbosity, task })
}

/// `--order`, or its default: a plan for another order than the firmware runs would corrupt
/// memory, so `best` only where the order travels with the plan (`--emit-tflite`).
fn order_mode(given: Option<super::args::OrderArg>, emit_tflite: bool) -> OrderMode {
    match given {
        Some(super::args::OrderArg::Best) => OrderMode::Best,
        Some(super::args::OrderArg::Keep) => OrderMode::Keep,
        None if emit_tflite => OrderMode::Best,
        None => OrderMode::Keep,
    }
}

fn plan(args: PlanArgs) -> Result<PlanConfig> {
    // Checked before anything is read or planned, which may take long.
    let render = RenderOptions {
        prefix: args.prefix,
        external_arenas: args.external_arenas,
        planner: String::new(),
        planners: Vec::new(),
        emit_tflite: args.emit_tflite,
    };
    render::check_options(&render)?;
    let target = target(args.target)?;
    if args.emit_tflite && !target.external_io.kinds.is_empty() {
        return Err(Error::input(render::EXTERNAL_WITH_EMIT_TFLITE.to_string()));
    }
    if args.emit_tflite && !crate::input::is_tflite_path(&args.input) {
        return Err(Error::input(format!(
            "--emit-tflite writes the input .tflite model with memplan's plan, but {} is not a \
             .tflite model; drop --emit-tflite or plan the .tflite file",
            args.input.display()
        )));
    }
    if args.ignore_offline_plan && !crate::input::is_tflite_path(&args.input) {
        return Err(Error::input(format!(
            "--ignore-offline-plan drops the offline plan a .tflite model carries, but {} is not \
             a .tflite model; drop --ignore-offline-plan",
            args.input.display()
        )));
    }
    emit::check_destination(&args.out)?;
    let limits = run_limits(args.timeout, &args.isolation)?;
    let plugins = plugins(args.plugins)?;
    let planners = parse::planner_list(&args.planner)?;
    let options = parse::planner_options(&args.planner_options, &planners)?;
    let order = order_mode(args.order, args.emit_tflite);
    Ok(PlanConfig {
        order,
        input: args.input,
        planners,
        options,
        target,
        render,
        out: args.out,
        isolate: isolation(args.isolation.isolate),
        limits,
        plugins,
        format: args.format,
        ignore_offline_plan: args.ignore_offline_plan,
    })
}

fn planners(args: PlannersArgs) -> Result<PlannersConfig> {
    Ok(PlannersConfig {
        plugins: plugins(args.plugins)?,
        format: args.format,
    })
}

fn check(args: CheckArgs) -> Result<CheckConfig> {
    Ok(CheckConfig {
        input: args.input,
        plan: args.plan,
        target: target(args.target)?,
        format: args.format,
    })
}

fn bench(args: BenchArgs, verbosity: Verbosity) -> Result<BenchConfig> {
    let planners = parse::planner_list(&args.planner)?;
    let options = parse::planner_options(&args.planner_options, &planners)?;
    let plugins = plugins(args.plugins)?;
    let limits = run_limits(args.timeout, &args.isolation)?;
    if let Some(solutions) = &args.solutions {
        // Written as --out is (whole, atomically, only over a directory memplan wrote): a
        // wrong one is reported before any planner runs.
        emit::check_destination(solutions)?;
    }
    Ok(BenchConfig {
        inputs: args.inputs,
        planners,
        options,
        target: target(args.target)?,
        runs: args.runs,
        limits,
        isolate: isolation(args.isolation.isolate),
        plugins,
        format: args.format,
        show_progress: !verbosity.quiet,
        solutions: args.solutions,
    })
}

/// `--timeout` and `--plan-memory-limit` (an isolated planner without a timeout gets
/// [`crate::runner::run::DEFAULT_ISOLATED_TIMEOUT`] when it runs).
fn run_limits(timeout: Option<f64>, isolation: &IsolationArgs) -> Result<RunLimits> {
    Ok(RunLimits {
        timeout: parse::timeout(timeout)?,
        memory_limit: isolation
            .plan_memory_limit
            .as_deref()
            .map(parse::plan_memory_limit)
            .transpose()?,
    })
}

fn isolation(when: IsolateWhen) -> Isolation {
    match when {
        IsolateWhen::Never => Isolation::Never,
        IsolateWhen::Always => Isolation::Always,
        IsolateWhen::Auto => Isolation::Auto,
    }
}

fn target(args: TargetArgs) -> Result<TargetConfig> {
    Ok(TargetConfig {
        target: args.target,
        constraints: parse::memory_constraints(&args.memory)?,
        rules: args.rules,
        external_io: ExternalIo {
            kinds: match &args.external_io {
                Some(spec) => external_io::parse_kinds(spec)?,
                None => Vec::new(),
            },
            ids: Vec::new(),
        },
    })
}

/// The plugin search directories and trust policy (`--allow-insecure-plugins`,
/// `--plugin-sha256`, `--lock` or `./memplan.lock`).
fn plugins(args: PluginArgs) -> Result<PluginConfig> {
    let cwd = std::env::current_dir()
        .map_err(|error| Error::internal(format!("cannot find the current directory: {error}")))?;
    let pins = args
        .plugin_sha256
        .iter()
        .map(|arg| parse::plugin_pin(arg))
        .collect::<Result<Vec<_>>>()?;
    let trust = TrustPolicy::from_args(
        args.allow_insecure_plugins,
        &pins,
        args.lock.as_deref(),
        &cwd,
    )?;
    Ok(PluginConfig {
        dirs: args.plugin_dirs,
        trust,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    fn plan_limits(args: &[&str]) -> RunLimits {
        let cli =
            Cli::try_parse_from(["memplan", "plan", "model.json"].iter().chain(args)).unwrap();
        match resolve(cli).unwrap().task {
            Task::Plan(plan) => plan.limits,
            other => panic!("{other:?}"),
        }
    }

    fn plan_isolation(args: &[&str]) -> Isolation {
        let cli =
            Cli::try_parse_from(["memplan", "plan", "model.json"].iter().chain(args)).unwrap();
        match resolve(cli).unwrap().task {
            Task::Plan(plan) => plan.isolate,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn isolate_alone_means_always_and_auto_is_the_default() {
        assert_eq!(plan_isolation(&[]), Isolation::Auto);
        assert_eq!(plan_isolation(&["--isolate"]), Isolation::Always);
        assert_eq!(plan_isolation(&["--isolate=never"]), Isolation::Never);
        assert_eq!(plan_isolation(&["--isolate=auto"]), Isolation::Auto);
        // `--isolate model.json` must not read the model's name as WHEN.
        let cli = Cli::try_parse_from(["memplan", "plan", "--isolate", "model.json"]).unwrap();
        match resolve(cli).unwrap().task {
            Task::Plan(plan) => {
                assert_eq!(plan.isolate, Isolation::Always);
                assert_eq!(plan.input, PathBuf::from("model.json"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_isolated_planner_gets_a_default_time_limit() {
        use crate::runner::run::DEFAULT_ISOLATED_TIMEOUT;
        assert_eq!(
            plan_limits(&["--isolate"]).for_worker().timeout,
            Some(DEFAULT_ISOLATED_TIMEOUT)
        );
        assert_eq!(
            plan_limits(&["--isolate", "--timeout", "2"])
                .for_worker()
                .timeout,
            Some(Duration::from_secs(2))
        );
        assert_eq!(plan_limits(&[]).timeout, None);
    }

    #[test]
    fn the_plan_memory_limit_reads_binary_units() {
        assert_eq!(
            plan_limits(&["--plan-memory-limit", "2G"]).memory_limit,
            Some(2 << 30)
        );
        assert_eq!(plan_limits(&[]).memory_limit, None);
    }
}
