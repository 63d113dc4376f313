//! The root module every plugin exports, and the `export_planners!` macro that builds it.
//!
//! abi_stable's `#[export_root_module]` attribute expands to paths under `::abi_stable`, which
//! would force every plugin to depend on abi_stable itself. `export_planners!` emits the same
//! loader static through `$crate::abi_stable`, so `memplan-plugin-api` is the only dependency
//! a plugin needs. The symbol name is abi_stable's mangled loader name; a unit test pins it to
//! `abi_stable::library::ROOT_MODULE_LOADER_NAME`.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use abi_stable::library::RootModule;
use abi_stable::prefix_type::WithMetadata;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RResult, RSlice, RStr};
use abi_stable::{declare_root_module_statics, StableAbi};

use crate::abi::{MemoryPlan, PlanError, PlanErrorKind, PlanRequest};
use crate::context::HostContext;

/// The plugin ABI version. Independent of the crate version (set in `build.rs`, which also
/// makes abi_stable record it as the version of every type): a host and a plugin built
/// against any plugin-api release with ABI `1.x` agree. A layout change of any type in
/// [`crate::abi`] is a new major version.
pub const ABI_VERSION: &str = env!("MEMPLAN_ABI_VERSION");

/// The symbol abi_stable looks up in a dynamic library (see the module docs).
#[doc(hidden)]
pub const LOADER_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// A planner implemented in Rust. `export_planners!` turns each into a [`PlannerEntry`].
pub trait Planner {
    /// The name users select with `--planner NAME`. Lowercase, `[a-z0-9-]`.
    const NAME: &'static str;
    /// The planner's own version (shown by `memplan planners`).
    const VERSION: &'static str;
    /// One line describing the algorithm.
    const DESCRIPTION: &'static str;

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError>;
}

/// One planner exported by a plugin.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct PlannerEntry {
    pub name: RStr<'static>,
    pub version: RStr<'static>,
    pub description: RStr<'static>,
    /// The planner's entry point. Never unwinds: panics are caught and returned as
    /// [`PlanErrorKind::Panicked`].
    pub plan: extern "C" fn(
        request: &PlanRequest,
        context: &HostContext,
    ) -> RResult<MemoryPlan, PlanError>,
}

impl PlannerEntry {
    pub const fn of<P: Planner>() -> Self {
        PlannerEntry {
            name: RStr::from_str(P::NAME),
            version: RStr::from_str(P::VERSION),
            description: RStr::from_str(P::DESCRIPTION),
            plan: plan_entry_point::<P>,
        }
    }
}

/// The root module of a memplan plugin. New fields go after `planners`, each with
/// `#[sabi(last_prefix_field)]` moved onto it; the host treats a missing field as absent.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(option))]
pub struct PluginModule {
    /// The ABI version the plugin was built against (informational; abi_stable checks it).
    pub abi_version: RStr<'static>,
    #[sabi(last_prefix_field)]
    pub planners: RSlice<'static, PlannerEntry>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "memplan_plugin";
    const NAME: &'static str = "memplan planner plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(ABI_VERSION);
}

/// Builds the root module of a plugin. Called once per load by the exported loader.
#[doc(hidden)]
pub fn __plugin_module(planners: &'static [PlannerEntry]) -> PluginModuleRef {
    let module = PluginModule {
        abi_version: RStr::from_str(ABI_VERSION),
        planners: RSlice::from_slice(planners),
    };
    let leaked: &'static WithMetadata<PluginModule> =
        Box::leak(Box::new(WithMetadata::new(module)));
    PluginModuleRef(leaked.static_as_prefix())
}

thread_local! {
    /// Message and location of the last panic on this thread, recorded by our panic hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per plugin) a panic hook that records the panic instead of printing it, so
/// that the host can show it as one readable error line.
fn install_panic_recorder() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = payload_message(info.payload());
            let text = match info.location() {
                Some(location) => format!("{message} (at {location})"),
                None => message,
            };
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(text));
        }));
    });
}

fn payload_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// The `extern "C"` entry point generated for each planner: runs it and turns a panic into an
/// error value (a panic must never unwind across the ABI: that aborts the host).
extern "C" fn plan_entry_point<P: Planner>(
    request: &PlanRequest,
    context: &HostContext,
) -> RResult<MemoryPlan, PlanError> {
    install_panic_recorder();
    match catch_unwind(AssertUnwindSafe(|| P::plan(request, context))) {
        Ok(Ok(plan)) => RResult::ROk(plan),
        Ok(Err(error)) => RResult::RErr(error),
        Err(payload) => {
            let recorded = LAST_PANIC.with(|last| last.borrow_mut().take());
            let message = recorded.unwrap_or_else(|| payload_message(payload.as_ref()));
            // The message is the panic text alone: the host adds the planner's name and file.
            RResult::RErr(PlanError::new(PlanErrorKind::Panicked, message))
        }
    }
}

/// Exports one or more planners from a `cdylib` plugin.
///
/// ```text
/// struct Linear;
/// impl memplan_plugin_api::Planner for Linear { /* NAME, VERSION, DESCRIPTION, plan */ }
/// memplan_plugin_api::export_planners!(Linear);
/// ```
///
/// Use it once per crate. Every panic inside a planner is caught and returned to the host as
/// an error carrying the panic message.
#[macro_export]
macro_rules! export_planners {
    ($($planner:ty),+ $(,)?) => {
        /// The planner manifest (see `memplan_plugin_api::manifest`): the host reads it from
        /// the file before loading it. Referenced from the root module so that no linker
        /// drops it.
        #[doc(hidden)]
        #[used]
        #[cfg_attr(
            all(unix, not(target_vendor = "apple")),
            unsafe(link_section = ".memplan_planners")
        )]
        pub static MEMPLAN_PLANNER_MANIFEST: [u8; $crate::manifest::__manifest_len(&[$([
            <$planner as $crate::Planner>::NAME,
            <$planner as $crate::Planner>::VERSION,
            <$planner as $crate::Planner>::DESCRIPTION,
        ]),+])] = $crate::manifest::__manifest(&[$([
            <$planner as $crate::Planner>::NAME,
            <$planner as $crate::Planner>::VERSION,
            <$planner as $crate::Planner>::DESCRIPTION,
        ]),+]);

        $crate::planner_root_module!($($planner),+);

        #[doc(hidden)]
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static MEMPLAN_PLUGIN_ROOT_MODULE_LOADER: $crate::abi_stable::library::LibHeader = {
            fn exported_root_module() -> $crate::PluginModuleRef {
                ::std::hint::black_box(&MEMPLAN_PLANNER_MANIFEST);
                memplan_root_module()
            }
            extern "C" fn memplan_erased_root_module() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(exported_root_module)
            }
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModuleRef>(
                    memplan_erased_root_module,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// Defines `pub fn memplan_root_module() -> PluginModuleRef`: the root module of planners
/// linked into a program rather than loaded from a file, the very module the exported loader
/// of [`export_planners!`] returns. memplan links its own planners in this way (their crates
/// build as `rlib`s) and calls them through the same [`PlannerEntry`] path as a loaded
/// plugin's.
///
/// A crate linked into memplan must not call `export_planners!` itself: the loader symbol has
/// one fixed name, so two such crates in one program would define it twice. Its `cdylib` is a
/// separate crate that calls `export_planners!` with the same planners.
#[macro_export]
macro_rules! planner_root_module {
    ($($planner:ty),+ $(,)?) => {
        /// The root module of this crate's planners (see
        /// `memplan_plugin_api::planner_root_module!`).
        #[doc(hidden)]
        pub fn memplan_root_module() -> $crate::PluginModuleRef {
            static ENTRIES: &[$crate::PlannerEntry] =
                &[$($crate::PlannerEntry::of::<$planner>()),+];
            static MODULE: ::std::sync::OnceLock<$crate::PluginModuleRef> =
                ::std::sync::OnceLock::new();
            *MODULE.get_or_init(|| $crate::__plugin_module(ENTRIES))
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{PlanErrorKind, PlanRequest};
    use abi_stable::std_types::{RString, RVec};

    #[test]
    fn abi_stable_records_the_abi_version_not_the_crate_version() {
        use abi_stable::StableAbi;
        for layout in [
            <PlanRequest as StableAbi>::LAYOUT,
            <MemoryPlan as StableAbi>::LAYOUT,
            <PlannerEntry as StableAbi>::LAYOUT,
        ] {
            let (package, version) = layout.package_and_version();
            assert_eq!(package, "memplan-plugin-api");
            assert_eq!(version.to_string(), ABI_VERSION);
        }
        // The crate's own version follows semver for its Rust API and may differ.
        assert_eq!(ABI_VERSION, "1.0.0");
        assert_eq!(env!("MEMPLAN_PLUGIN_API_CRATE_VERSION"), "2.0.0");
    }

    #[test]
    fn loader_symbol_matches_abi_stable() {
        assert_eq!(LOADER_SYMBOL, abi_stable::library::ROOT_MODULE_LOADER_NAME);
    }

    struct Panics;
    impl Planner for Panics {
        const NAME: &'static str = "panics";
        const VERSION: &'static str = "0.0.0";
        const DESCRIPTION: &'static str = "always panics";
        fn plan(_: &PlanRequest, _: &HostContext) -> Result<MemoryPlan, PlanError> {
            panic!("out of ideas at step {}", 7)
        }
    }

    #[test]
    fn panics_become_error_values_with_the_message() {
        let request = PlanRequest {
            tensors: RVec::new(),
            memories: RVec::new(),
            num_steps: 0,
            options: RString::from("{}"),
        };
        let entry = PlannerEntry::of::<Panics>();
        let result = (entry.plan)(&request, &HostContext::detached()).into_result();
        let error = result.expect_err("a panic must come back as an error");
        assert_eq!(error.kind, PlanErrorKind::Panicked);
        assert!(
            error.message.contains("out of ideas at step 7"),
            "{}",
            error.message
        );
        assert!(error.message.contains("src/export.rs"), "{}", error.message);
    }
}
