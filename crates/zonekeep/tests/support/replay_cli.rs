//! Running the built `zonekeep replay` on recordings, and checking where a changed one diverges.

use std::path::Path;
use std::process::Command;

/// Runs `zonekeep replay` on `path`: exit code, stdout, stderr.
pub fn replay(path: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .arg("replay")
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Replays a copy of the recording `bytes` (written under `dir`) whose byte `at`, an input's
/// payload byte, is XORed with `mask`: it must exit 1 and name tick `arrived + 1`, the tick that
/// consumed the input, with `arrived` the last that matched. Returns the report.
pub fn assert_changed_input_diverges(
    dir: &Path,
    bytes: &[u8],
    at: usize,
    mask: u8,
    arrived: u64,
) -> String {
    let mut changed = bytes.to_vec();
    changed[at] ^= mask;
    let path = dir.join("changed.zkrec");
    std::fs::write(&path, &changed).unwrap();
    let (code, out, err) = replay(&path);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(&format!("DIVERGED at tick {}\n", arrived + 1)),
        "arrived after tick {arrived}: {out}"
    );
    assert!(
        out.contains(&format!("last matching tick: {arrived}\n")),
        "{out}"
    );
    out
}
