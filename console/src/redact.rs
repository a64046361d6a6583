//! Store URLs as the console shows them: without secrets.

/// `postgres://user:secret@host/db?password=x&sslmode=require` →
/// `postgres://user:***@host/db?password=***&sslmode=require`: the password of the authority
/// and any `password` query parameter are replaced (other parameters are kept, so the operator
/// still sees which store this is).
pub fn redact_store_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = redact_authority(head);
    if let Some(query) = query {
        shown.push('?');
        let parameters: Vec<String> = query
            .split('&')
            .map(|parameter| match parameter.split_once('=') {
                Some((key, _)) if is_secret(key) => format!("{key}=***"),
                _ => parameter.to_owned(),
            })
            .collect();
        shown.push_str(&parameters.join("&"));
    }
    shown
}

fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == "password" || key == "passwd" || key == "pass" || key.ends_with("password")
}

fn redact_authority(head: &str) -> String {
    let Some((scheme, rest)) = head.split_once("://") else {
        return head.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => head.to_owned(),
        },
        None => head.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_shown() {
        for (url, shown) in [
            ("sqlite:/tmp/runs.db", "sqlite:/tmp/runs.db"),
            (
                "sqlite:/tmp/runs.db?synchronous=normal",
                "sqlite:/tmp/runs.db?synchronous=normal",
            ),
            (
                "postgres://me:s3cret@db.example:5432/runs",
                "postgres://me:***@db.example:5432/runs",
            ),
            ("postgresql://me@db/runs", "postgresql://me@db/runs"),
            (
                "postgres://db/runs?user=me&password=s3cret&sslmode=require",
                "postgres://db/runs?user=me&password=***&sslmode=require",
            ),
            (
                "postgres://me:a@b@db/runs?PASSWORD=s3cret",
                "postgres://me:***@db/runs?PASSWORD=***",
            ),
            ("postgres://me:s3cret@db", "postgres://me:***@db"),
        ] {
            let redacted = redact_store_url(url);
            assert_eq!(redacted, shown, "{url}");
            assert!(!redacted.contains("s3cret"));
        }
    }
}
