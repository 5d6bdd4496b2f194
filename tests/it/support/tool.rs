//! The operations tool, `redmutex`, as a subprocess. Cargo builds it only with the `cli`
//! feature, but names its path to every test build, so a test that runs it without that
//! feature compiles and then fails to find it. Here the helper itself exists only with the
//! feature: such a test does not compile without it.

/// A command running the tool, with the environment variables it reads (`REDIS_URL`,
/// `REDMUTEX_PREFIX`) removed, for the test to set what it means.
pub fn tool() -> assert_cmd::Command {
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("redmutex");
    cmd.env_remove("REDIS_URL").env_remove("REDMUTEX_PREFIX");
    cmd
}
