//! `--db-cpu`: the bench's Postgres confined to a share of a core by a CPU
//! cgroup, as a deployment's shared database is bound (workers and
//! tidemark replicas run elsewhere; the database is what they share).
//!
//! cgroup v1 (as on this machine: `cpu` and `cpuacct` mounted apart) uses
//! `cpu.cfs_quota_us` over `cpu.cfs_period_us` and reads `cpuacct.usage`;
//! cgroup v2 uses `cpu.max` and `cpu.stat`'s `usage_usec`. The postmaster
//! and every process it has forked are moved in; backends forked later
//! inherit the group. The group is removed on drop.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The scheduler period the quota is a share of (the kernel's default).
const PERIOD_US: u64 = 100_000;

/// The groups' names: this prefix and the bench's process id.
const PREFIX: &str = "tidemark-bench-";

/// A CPU cgroup with a quota, and where to read what its processes used.
#[derive(Debug)]
pub(crate) struct CpuLimit {
    cores: f64,
    /// The group's directories (v1: one per hierarchy; v2: one).
    dirs: Vec<PathBuf>,
    usage: CpuUsage,
    description: String,
}

/// Where a cgroup's CPU time is read from.
#[derive(Debug, Clone)]
pub(crate) enum CpuUsage {
    /// cgroup v1 `cpuacct.usage`: nanoseconds.
    V1(PathBuf),
    /// cgroup v2 `cpu.stat`: its `usage_usec` line.
    V2(PathBuf),
}

impl CpuUsage {
    /// CPU seconds used by the group's processes since it was made.
    pub(crate) fn seconds(&self) -> Option<f64> {
        match self {
            Self::V1(path) => {
                let nanos: u64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
                Some(nanos as f64 / 1e9)
            }
            Self::V2(path) => {
                let stat = std::fs::read_to_string(path).ok()?;
                let micros: u64 = stat
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))?
                    .trim()
                    .parse()
                    .ok()?;
                Some(micros as f64 / 1e6)
            }
        }
    }
}

/// A cgroup mount from /proc/self/mounts.
struct Mount {
    path: PathBuf,
    version2: bool,
    options: Vec<String>,
}

fn mounts() -> anyhow::Result<Vec<Mount>> {
    let text = std::fs::read_to_string("/proc/self/mounts").context("cannot read /proc/self/mounts")?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (path, kind, options) = (fields.get(1)?, fields.get(2)?, fields.get(3)?);
            (*kind == "cgroup" || *kind == "cgroup2").then(|| Mount {
                path: PathBuf::from(path),
                version2: *kind == "cgroup2",
                options: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect())
}

impl CpuLimit {
    /// Makes a group limited to `cores` (e.g. 0.5) under the first writable
    /// CPU hierarchy: v1's `cpu` (with `cpuacct` for the accounting), else
    /// a v2 hierarchy offering the `cpu` controller.
    pub(crate) fn create(cores: f64) -> anyhow::Result<Self> {
        if !(cores > 0.0 && cores.is_finite()) {
            bail!("--db-cpu must be a positive number of cores (got {cores})");
        }
        let quota = ((cores * PERIOD_US as f64).round() as u64).max(1_000);
        let name = format!("{PREFIX}{}", std::process::id());
        let mounts = mounts()?;
        remove_abandoned(&mounts);
        let v1 = |controller: &str| {
            mounts
                .iter()
                .find(|m| !m.version2 && m.options.iter().any(|o| o == controller))
                .map(|m| m.path.clone())
        };
        let why_not = "a CPU cgroup needs a writable cgroup filesystem (root, or a delegated subtree) with the \
                       cpu controller: cgroup v1's cpu and cpuacct hierarchies, or cgroup v2 with cpu in \
                       cgroup.controllers";
        if let (Some(cpu), Some(cpuacct)) = (v1("cpu"), v1("cpuacct")) {
            let cpu_dir = cpu.join(&name);
            make_dir(&cpu_dir).with_context(|| why_not.to_owned())?;
            let mut dirs = vec![cpu_dir.clone()];
            let acct_dir = cpuacct.join(&name);
            if acct_dir != cpu_dir {
                make_dir(&acct_dir).with_context(|| why_not.to_owned())?;
                dirs.push(acct_dir.clone());
            }
            let limit = Self {
                cores,
                dirs,
                usage: CpuUsage::V1(acct_dir.join("cpuacct.usage")),
                description: format!(
                    "{cores} cores: cgroup v1 {} cpu.cfs_quota_us={quota} cpu.cfs_period_us={PERIOD_US}",
                    cpu_dir.display()
                ),
            };
            write(&cpu_dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&cpu_dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            return Ok(limit);
        }
        let Some(v2) = mounts.iter().find(|m| {
            m.version2
                && std::fs::read_to_string(m.path.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"))
        }) else {
            bail!("no CPU cgroup hierarchy is mounted here: {why_not}");
        };
        // The controller must be enabled for the root's children.
        let _ = std::fs::write(v2.path.join("cgroup.subtree_control"), "+cpu");
        let dir = v2.path.join(&name);
        make_dir(&dir).with_context(|| why_not.to_owned())?;
        let limit = Self {
            cores,
            dirs: vec![dir.clone()],
            usage: CpuUsage::V2(dir.join("cpu.stat")),
            description: format!("{cores} cores: cgroup v2 {} cpu.max={quota} {PERIOD_US}", dir.display()),
        };
        write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
        Ok(limit)
    }

    /// Moves `pid` and then its children, listed by `children` once the
    /// parent is inside (a child forked after that is born inside).
    pub(crate) fn add_tree(&self, pid: u32, children: impl FnOnce() -> Vec<u32>) -> anyhow::Result<usize> {
        self.add(pid)?;
        let mut moved = 1;
        for child in children() {
            // A backend may exit between the listing and the move.
            if self.add(child).is_ok() {
                moved += 1;
            }
        }
        Ok(moved)
    }

    fn add(&self, pid: u32) -> anyhow::Result<()> {
        for dir in &self.dirs {
            write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Where its CPU time is read.
    pub(crate) fn usage(&self) -> CpuUsage {
        self.usage.clone()
    }

    /// The limit in cores.
    pub(crate) fn cores(&self) -> f64 {
        self.cores
    }

    /// The limit as recorded with the results.
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        for dir in &self.dirs {
            remove_group(dir);
        }
    }
}

/// Removes a group: it can only go once empty, so what is left in it
/// (Postgres still stopping) goes back to the parent first.
fn remove_group(dir: &Path) {
    let Some(parent) = dir.parent() else { return };
    for _ in 0..50 {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid);
            }
        }
        if std::fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Groups a bench that was killed left behind (its process is gone): its
/// Postgres, if still running, goes back to the parent unconfined.
fn remove_abandoned(mounts: &[Mount]) {
    for mount in mounts {
        let Ok(entries) = std::fs::read_dir(&mount.path) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                remove_group(&entry.path());
            }
        }
    }
}

fn make_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir(dir).with_context(|| format!("cannot create the cgroup {}", dir.display()))
}

fn write(path: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(path, value).with_context(|| format!("cannot write {value} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_either_version() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("cpuacct.usage");
        std::fs::write(&v1, "2500000000\n").unwrap();
        assert_eq!(CpuUsage::V1(v1).seconds(), Some(2.5));
        let v2 = dir.path().join("cpu.stat");
        std::fs::write(&v2, "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n").unwrap();
        assert_eq!(CpuUsage::V2(v2).seconds(), Some(1.5));
        assert_eq!(CpuUsage::V1(dir.path().join("missing")).seconds(), None);
    }

    #[test]
    fn a_limit_of_no_cores_is_refused_before_anything_is_made() {
        for cores in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = CpuLimit::create(cores).unwrap_err().to_string();
            assert!(err.contains("--db-cpu must be a positive number"), "{err}");
        }
    }
}
