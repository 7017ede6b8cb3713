//! `n8ncap report DIR`: report.html of a results directory drawn again, the run re-diagnosed
//! with what it recorded (its settings and host).

use crate::error;
use std::path::PathBuf;

pub(super) async fn run(dir: PathBuf) -> anyhow::Result<i32> {
    let (summary, _, _) = super::input::rejudged(&dir).await?;
    let dir = if dir.is_dir() {
        dir
    } else {
        dir.parent().map(|p| p.to_path_buf()).unwrap_or_default()
    };
    let path = crate::report::html::write(&dir, &summary)?;
    println!("{}", path.display());
    Ok(error::EXIT_OK)
}
