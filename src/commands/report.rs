//! `n8ncap report DIR`: report.html of a results directory drawn again, the run re-diagnosed
//! with what it recorded (its settings and host).

use crate::error;
use crate::model::settings::Settings;
use std::path::PathBuf;

pub(super) fn run(dir: PathBuf) -> anyhow::Result<i32> {
    let mut summary = crate::record::dir::load_summary(&dir)?;
    let _ = super::analyze(&mut summary, Settings::default(), None);
    let dir = if dir.is_dir() {
        dir
    } else {
        dir.parent().map(|p| p.to_path_buf()).unwrap_or_default()
    };
    let path = crate::report::html::write(&dir, &summary)?;
    println!("{}", path.display());
    Ok(error::EXIT_OK)
}
