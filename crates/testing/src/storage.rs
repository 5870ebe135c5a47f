//! The shared storage test suite. Every backend runs every case through [`crate::storage_suite!`]
//! (native test runners) or by calling the cases from its own host (the edge adapters).
//! A case panics with a message naming what the backend got wrong.

use lore_base::storage::{Batch, Storage, StorageError};

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

pub async fn get_missing_is_none(s: &dyn Storage) {
    assert_eq!(s.get("missing/key").await.unwrap(), None);
}

pub async fn put_get_overwrite_delete(s: &dyn Storage) {
    s.put("a/1", b("one")).await.unwrap();
    assert_eq!(s.get("a/1").await.unwrap(), Some(b("one")));
    s.put("a/1", b("uno")).await.unwrap();
    assert_eq!(s.get("a/1").await.unwrap(), Some(b("uno")));
    s.delete("a/1").await.unwrap();
    assert_eq!(s.get("a/1").await.unwrap(), None);
    // Deleting a missing key is not an error.
    s.delete("a/1").await.unwrap();
}

pub async fn binary_and_large_values_round_trip(s: &dyn Storage) {
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    s.put("bin/all", all_bytes.clone()).await.unwrap();
    assert_eq!(s.get("bin/all").await.unwrap(), Some(all_bytes));
    let big = vec![b'x'; 1 << 20];
    s.put("bin/big", big.clone()).await.unwrap();
    assert_eq!(
        s.get("bin/big").await.unwrap().map(|v| v.len()),
        Some(big.len())
    );
    s.put("bin/empty", Vec::new()).await.unwrap();
    assert_eq!(s.get("bin/empty").await.unwrap(), Some(Vec::new()));
}

pub async fn scan_is_ordered_and_bounded_by_prefix(s: &dyn Storage) {
    for k in ["p/b", "p/a", "p/c", "p0", "p", "o/z", "p/a/x", "q/a"] {
        s.put(k, b(k)).await.unwrap();
    }
    let page = s.scan("p/", None, 100).await.unwrap();
    let keys: Vec<_> = page.entries.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["p/a", "p/a/x", "p/b", "p/c"]);
    assert_eq!(page.cursor, None);
    assert_eq!(page.entries[0].1, b("p/a"));
    assert!(
        s.scan("nothing/", None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
}

pub async fn scan_pages_resume_without_gaps_or_repeats(s: &dyn Storage) {
    let mut expected = Vec::new();
    for i in 0..57 {
        let k = format!("pg/{i:03}");
        s.put(&k, b(&k)).await.unwrap();
        expected.push(k);
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = s.scan("pg/", after.as_deref(), 10).await.unwrap();
        assert!(page.entries.len() <= 10, "page larger than the limit");
        pages += 1;
        seen.extend(page.entries.into_iter().map(|(k, _)| k));
        match page.cursor {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(pages, 6);
    // An exact multiple of the limit ends without an empty trailing page being required.
    let page = s.scan("pg/", Some("pg/046"), 10).await.unwrap();
    assert_eq!(page.entries.len(), 10);
    assert_eq!(page.cursor, None);
    assert_eq!(s.scan_all("pg/").await.unwrap().len(), 57);
}

pub async fn scan_returns_large_pages_whole(s: &dyn Storage) {
    // Regression: the D1 backend capped every page at 256 rows (a shift that wraps on wasm32),
    // so a scan of more than 256 keys stopped early and looked complete.
    let mut batch = Batch::new();
    for i in 0..700 {
        batch.put(format!("lg/{i:04}"), b("v"));
    }
    s.commit(batch).await.unwrap();
    let page = s.scan("lg/", None, 512).await.unwrap();
    assert_eq!(page.entries.len(), 512);
    assert_eq!(page.cursor.as_deref(), Some("lg/0511"));
    let rest = s.scan("lg/", page.cursor.as_deref(), 512).await.unwrap();
    assert_eq!(rest.entries.len(), 188);
    assert_eq!(rest.cursor, None);
    assert_eq!(s.scan_all("lg/").await.unwrap().len(), 700);
}

pub async fn scan_after_outside_prefix_is_clamped(s: &dyn Storage) {
    for k in ["r/a", "r/b"] {
        s.put(k, b(k)).await.unwrap();
    }
    // A cursor before the prefix starts at the prefix; one after it yields nothing.
    assert_eq!(s.scan("r/", Some("a"), 10).await.unwrap().entries.len(), 2);
    assert_eq!(s.scan("r/", Some("z"), 10).await.unwrap().entries.len(), 0);
}

pub async fn scan_back_pages_newest_first_without_gaps(s: &dyn Storage) {
    let mut expected = Vec::new();
    for i in 0..57 {
        let k = format!("bk/{i:03}");
        s.put(&k, b(&k)).await.unwrap();
        expected.push(k);
    }
    for k in ["bj/x", "bk", "bl/a"] {
        s.put(k, b(k)).await.unwrap();
    }
    expected.reverse();
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let page = s.scan_back("bk/", before.as_deref(), 10).await.unwrap();
        assert!(page.entries.len() <= 10, "page larger than the limit");
        for (k, v) in &page.entries {
            assert_eq!(v, &b(k), "values come with their keys");
        }
        seen.extend(page.entries.into_iter().map(|(k, _)| k));
        match page.cursor {
            Some(c) => before = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    // A bound inside the prefix, one before it and one after it.
    let page = s.scan_back("bk/", Some("bk/010"), 100).await.unwrap();
    assert_eq!(page.entries.len(), 10);
    assert_eq!(page.entries[0].0, "bk/009");
    assert_eq!(page.cursor, None);
    assert!(
        s.scan_back("bk/", Some("a"), 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    let page = s.scan_back("bk/", Some("z"), 3).await.unwrap();
    assert_eq!(page.entries[0].0, "bk/056");
    assert_eq!(page.cursor.as_deref(), Some("bk/054"));
    assert!(
        s.scan_back("nothing/", None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
}

pub async fn batch_applies_all_writes_together(s: &dyn Storage) {
    s.put("bt/old", b("x")).await.unwrap();
    let mut batch = Batch::new();
    batch
        .put("bt/1", b("1"))
        .put("bt/2", b("2"))
        .delete("bt/old");
    s.commit(batch).await.unwrap();
    assert_eq!(s.get("bt/1").await.unwrap(), Some(b("1")));
    assert_eq!(s.get("bt/2").await.unwrap(), Some(b("2")));
    assert_eq!(s.get("bt/old").await.unwrap(), None);
    // Later writes in one batch win over earlier ones to the same key.
    let mut batch = Batch::new();
    batch.put("bt/3", b("first")).put("bt/3", b("second"));
    s.commit(batch).await.unwrap();
    assert_eq!(s.get("bt/3").await.unwrap(), Some(b("second")));
}

pub async fn failed_check_writes_nothing(s: &dyn Storage) {
    s.put("ck/taken", b("v1")).await.unwrap();
    let mut batch = Batch::new();
    batch
        .require_absent("ck/taken")
        .put("ck/new", b("n"))
        .delete("ck/taken");
    let err = s.commit(batch).await.unwrap_err();
    assert_eq!(
        err,
        StorageError::Conflict {
            key: "ck/taken".into()
        }
    );
    assert_eq!(s.get("ck/new").await.unwrap(), None);
    assert_eq!(s.get("ck/taken").await.unwrap(), Some(b("v1")));

    let mut batch = Batch::new();
    batch
        .require_equals("ck/taken", b("v0"))
        .put("ck/taken", b("v2"));
    assert!(matches!(
        s.commit(batch).await,
        Err(StorageError::Conflict { .. })
    ));
    assert_eq!(s.get("ck/taken").await.unwrap(), Some(b("v1")));

    let mut batch = Batch::new();
    batch
        .require_equals("ck/taken", b("v1"))
        .require_absent("ck/free")
        .put("ck/taken", b("v2"));
    s.commit(batch).await.unwrap();
    assert_eq!(s.get("ck/taken").await.unwrap(), Some(b("v2")));
}

/// A batch a power cut may lose (usage counts) commits as any other: its checks hold or
/// nothing is written, and the batches after it commit as before.
pub async fn relaxed_batches_commit_like_any(s: &dyn Storage) {
    s.put("rx/count", b("1")).await.unwrap();
    let mut stale = Batch::new();
    stale
        .relaxed()
        .require_equals("rx/count", b("0"))
        .put("rx/count", b("9"));
    assert!(matches!(
        s.commit(stale).await,
        Err(StorageError::Conflict { .. })
    ));
    assert_eq!(s.get("rx/count").await.unwrap(), Some(b("1")));
    let mut batch = Batch::new();
    batch
        .relaxed()
        .require_equals("rx/count", b("1"))
        .put("rx/count", b("2"));
    s.commit(batch).await.unwrap();
    assert_eq!(s.get("rx/count").await.unwrap(), Some(b("2")));
    let mut after = Batch::new();
    after
        .require_equals("rx/count", b("2"))
        .put("rx/after", b("a"));
    s.commit(after).await.unwrap();
    assert_eq!(s.get("rx/after").await.unwrap(), Some(b("a")));
}

pub async fn invalid_keys_are_refused(s: &dyn Storage) {
    for key in ["", "has space", "tab\tkey", "é", &"k".repeat(513)] {
        assert!(
            matches!(s.get(key).await, Err(StorageError::InvalidKey { .. })),
            "get({key:?}) should be refused"
        );
        let mut batch = Batch::new();
        batch.put("ok/key", b("v")).put(key, b("v"));
        assert!(matches!(
            s.commit(batch).await,
            Err(StorageError::InvalidKey { .. })
        ));
    }
    // The refused batches wrote nothing, not even their valid keys.
    assert_eq!(s.get("ok/key").await.unwrap(), None);
}

pub async fn get_many_answers_in_key_order(s: &dyn Storage) {
    assert_eq!(
        s.get_many(&[]).await.unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
    let mut batch = Batch::new();
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    batch
        .put("gm/b", b("bee"))
        .put("gm/a", b("ay"))
        .put("gm/bin", all_bytes.clone());
    for i in 0..250 {
        batch.put(format!("gm/n/{i:03}"), format!("v{i}").into_bytes());
    }
    s.commit(batch).await.unwrap();
    let keys: Vec<String> = ["gm/b", "gm/missing", "gm/a", "gm/b", "gm/bin"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(
        s.get_many(&keys).await.unwrap(),
        vec![
            Some(b("bee")),
            None,
            Some(b("ay")),
            Some(b("bee")),
            Some(all_bytes)
        ]
    );
    // More keys than one query takes, in reverse order, some missing.
    let keys: Vec<String> = (0..300).rev().map(|i| format!("gm/n/{i:03}")).collect();
    let values = s.get_many(&keys).await.unwrap();
    for (i, v) in (0..300).rev().zip(values) {
        assert_eq!(
            v,
            (i < 250).then(|| format!("v{i}").into_bytes()),
            "gm/n/{i:03}"
        );
    }
    // Each count of keys on either side of the few-key query (one point read per key), and a
    // last chunk of one.
    for n in 1..=lore_base::storage::GET_FEW + 2 {
        let keys: Vec<String> = (0..n).map(|i| format!("gm/n/{:03}", 248 + i)).collect();
        let want: Vec<_> = (0..n)
            .map(|i| (248 + i < 250).then(|| format!("v{}", 248 + i).into_bytes()))
            .collect();
        assert_eq!(s.get_many(&keys).await.unwrap(), want, "{n} keys");
    }
    let keys: Vec<String> = (0..=lore_base::storage::GET_MANY_CHUNK)
        .map(|i| format!("gm/n/{i:03}"))
        .collect();
    let values = s.get_many(&keys).await.unwrap();
    assert_eq!(values.last(), Some(&Some(b"v100".to_vec())));
    let bad = vec!["gm/a".to_string(), "has space".to_string()];
    assert!(matches!(
        s.get_many(&bad).await,
        Err(StorageError::InvalidKey { .. })
    ));
}

/// Every case in one list: [`CASES`] names them and [`run_case`] runs one by name, for hosts
/// that drive the suite from outside a Rust test runner (the Workers adapter on D1).
macro_rules! by_name {
    ($($case:ident),* $(,)?) => {
        /// The name of every case, in the order [`crate::storage_suite!`] runs them.
        pub const CASES: &[&str] = &[$(stringify!($case)),*];

        /// Runs the case called `name` against `s`; `false` if there is no such case.
        pub async fn run_case(name: &str, s: &dyn Storage) -> bool {
            match name {
                $(stringify!($case) => $case(s).await,)*
                _ => return false,
            }
            true
        }
    };
}

by_name!(
    get_missing_is_none,
    put_get_overwrite_delete,
    binary_and_large_values_round_trip,
    scan_is_ordered_and_bounded_by_prefix,
    scan_pages_resume_without_gaps_or_repeats,
    scan_returns_large_pages_whole,
    scan_after_outside_prefix_is_clamped,
    scan_back_pages_newest_first_without_gaps,
    batch_applies_all_writes_together,
    failed_check_writes_nothing,
    relaxed_batches_commit_like_any,
    invalid_keys_are_refused,
    get_many_answers_in_key_order,
);

/// Runs one case per `#[test]` against a fresh store from `$make`.
#[macro_export]
macro_rules! storage_suite {
    ($make:expr) => {
        $crate::storage_suite!(@cases $make;
            get_missing_is_none,
            put_get_overwrite_delete,
            binary_and_large_values_round_trip,
            scan_is_ordered_and_bounded_by_prefix,
            scan_pages_resume_without_gaps_or_repeats,
            scan_returns_large_pages_whole,
            scan_after_outside_prefix_is_clamped,
            scan_back_pages_newest_first_without_gaps,
            batch_applies_all_writes_together,
            failed_check_writes_nothing,
            relaxed_batches_commit_like_any,
            invalid_keys_are_refused,
            get_many_answers_in_key_order,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        #[test]
        fn the_suite_runs_every_named_case() {
            assert_eq!($crate::storage::CASES, &[$(stringify!($case)),*]);
        }
        $(
            #[test]
            fn $case() {
                let store = $make;
                $crate::block_on($crate::storage::$case(&store));
            }
        )*
    };
}
