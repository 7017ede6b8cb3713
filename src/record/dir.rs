//! The results directory: `stages.jsonl` appended and flushed per stage, `summary.json`
//! rewritten atomically after each stage, `timeline.jsonl` written by the observer. Created
//! before the first request, so a bad path fails in a second, not after a long sweep.

use super::stage::StageResult;
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct ResultsDir {
    pub path: PathBuf,
    stages: File,
}

impl ResultsDir {
    /// Creates `dir` (or takes an empty one). A directory that already holds results is
    /// refused unless `force`: a second run must not mix its stages into the first's.
    pub fn create(dir: &Path, force: bool) -> anyhow::Result<ResultsDir> {
        if !force
            && ["summary.json", "stages.jsonl"]
                .iter()
                .any(|f| dir.join(f).exists())
        {
            return crate::error::bad_input(format!(
                "{} already holds the results of a run: choose another --out, or add --force to \
                 overwrite them",
                dir.display()
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the results directory {}: {e}; choose another with --out",
                dir.display()
            )
        })?;
        let stages_path = dir.join("stages.jsonl");
        let stages = File::create(&stages_path).map_err(|e| {
            anyhow::anyhow!(
                "cannot write {}: {e}; choose another --out",
                stages_path.display()
            )
        })?;
        Ok(ResultsDir {
            path: dir.to_path_buf(),
            stages,
        })
    }

    pub fn timeline(&self) -> anyhow::Result<File> {
        let p = self.path.join("timeline.jsonl");
        File::create(&p).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
    }

    pub fn append_stage(&mut self, s: &StageResult) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(s)?;
        line.push(b'\n');
        self.stages
            .write_all(&line)
            .and_then(|_| self.stages.flush())
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot write {}: {e}; what was measured so far is in summary.json",
                    self.path.join("stages.jsonl").display()
                )
            })
    }

    pub fn write_summary(&self, s: &impl Serialize) -> anyhow::Result<()> {
        write_atomic(
            &self.path.join("summary.json"),
            &serde_json::to_vec_pretty(s)?,
        )
    }
}

/// Writes a file through a temporary name so a reader never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow::anyhow!("cannot write {}: {e}", path.display())
        })
}
