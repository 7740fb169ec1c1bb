//! What the service shows of itself: its files, its page's headers, the
//! host names it answers to, the bearer scheme.

use std::os::unix::fs::PermissionsExt;

use crate::{serving, support::agent};

/// Finding 7: a data dir `caal` created was 0755 and its databases (with
/// WAL and SHM), `library_id` and `serve.json` 0644: every transcript,
/// memory and pending confirmation readable by every local user. Now the
/// dir is 0700 and everything in it 0600.
#[test]
fn the_data_dir_and_everything_in_it_are_its_owners_alone() {
    let (sb, served, token) = serving("", &[]);
    crate::chat(
        &served,
        &token,
        "private",
        "remember that the spare key is under the pot",
    );
    crate::chat(&served, &token, "private", "unlock the front door");
    // While it runs: serve.json, the WAL and SHM files are there.
    let mut seen = Vec::new();
    let mut check = |path: &std::path::Path| {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{} is {mode:o}", path.display());
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    };
    let data = sb.data();
    check(&data);
    for entry in walk(&data) {
        check(&entry);
    }
    for name in [
        "traces.db",
        "traces.db-wal",
        "state.db",
        "memory.db",
        "library_id",
        "serve.json",
        "api_token",
        "receipt_key",
    ] {
        assert!(seen.iter().any(|s| s == name), "{name} not among {seen:?}");
    }
    drop(served);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// Finding 9: the page could be framed (clickjacking its confirm button)
/// and any Host was answered (DNS rebinding); the lowercase `bearer`
/// scheme was refused.
#[test]
fn the_page_is_not_framed_other_hosts_are_refused_and_bearer_is_any_case() {
    let (_sb, served, token) = serving("[doors]\nhosts = [\"caal.home.arpa\"]\n", &[]);
    let page = agent(10).get(format!("{}/", served.url)).call().unwrap();
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert_eq!(
        page.headers()["content-security-policy"],
        "frame-ancestors 'none'"
    );
    let port = served.url.rsplit(':').next().unwrap().to_owned();
    let with_host = |host: &str| {
        let mut r = agent(10)
            .get(format!("{}/api/health", served.url))
            .header("Authorization", &format!("bearer {token}"))
            .header("Host", host)
            .call()
            .unwrap();
        (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        )
    };
    let (status, body) = with_host(&format!("rebind.attacker.example:{port}"));
    assert_eq!(status, 421, "{body}");
    assert!(body.contains("[doors] hosts"), "{body}");
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "caal.home.arpa".into(),
    ] {
        let (status, body) = with_host(&host);
        assert_eq!(status, 200, "{host}: {body}");
    }
}
