//! The planners of `memplan-planner-linear`, exported from a plugin file: the same planners memplan
//! has built in, for running them as a third-party plugin would be run (tests, and comparing
//! a built-in planner with a plugin file's).

memplan_plugin_api::export_planners!(memplan_planner_linear::Linear);
