//! The simulator's compose stacks as tests run them: the project's images built without a
//! registry (`examples/compose/simulated/build.sh`, with the test's own tag) and docker-compose
//! projects of a file the test writes, brought down and the images removed at the end (also on
//! failure).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The simulator's four images (n8n, runners, redis, postgres) under `n8ncap-sim/*:TAG`, and the
/// compose projects started from them; all removed when dropped.
pub struct SimStacks {
    pub tag: String,
    projects: Vec<(String, PathBuf)>,
}

impl SimStacks {
    /// Builds the images of this test binary's n8ncap with `tag`.
    pub fn build(tag: &str) -> SimStacks {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let built = Command::new("bash")
            .arg(root.join("examples/compose/simulated/build.sh"))
            .arg(super::bin())
            .env("TAG", tag)
            .output()
            .unwrap();
        let stacks = SimStacks {
            tag: tag.to_string(),
            projects: Vec::new(),
        };
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        stacks
    }

    /// `docker-compose -p project -f file up -d`, brought down when this is dropped.
    pub fn up(&mut self, project: &str, file: &Path) {
        self.projects
            .push((project.to_string(), file.to_path_buf()));
        let up = Command::new("docker-compose")
            .args(["-p", project, "-f"])
            .arg(file)
            .args(["up", "-d"])
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "{}",
            String::from_utf8_lossy(&up.stderr)
        );
    }
}

impl Drop for SimStacks {
    fn drop(&mut self) {
        for (project, file) in &self.projects {
            let _ = Command::new("docker-compose")
                .args(["-p", project, "-f"])
                .arg(file)
                .args(["down", "-t", "1"])
                .output();
        }
        for image in ["n8n", "runners", "redis", "postgres"] {
            let _ = Command::new("docker")
                .args(["rmi", "-f", &format!("n8ncap-sim/{image}:{}", self.tag)])
                .output();
        }
    }
}

/// A compose service's running container, by its compose labels.
pub fn container_of(project: &str, service: &str) -> String {
    let out = Command::new("docker")
        .args(["ps", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label=com.docker.compose.project={project}"))
        .arg("--filter")
        .arg(format!("label=com.docker.compose.service={service}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
