//! Group commit on a SQLite file (`src/group_commit.rs`): a batch that fails in a group fails
//! alone, and concurrent commits from many connections all land with their own outcomes.
// Native only: the worker threads of `lore serve` are what group commit serves.
#![allow(clippy::disallowed_methods)]

use lore_base::storage::{Batch, Storage, StorageError};

use lore::group_commit::commit_group;
use lore::sqlite::SqliteStorage;

fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lore-group-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("group.db")
}

/// In one group, a batch whose check fails is rolled back alone: the batches before and
/// after it commit, and its checks saw the writes of the batch before it.
#[test]
fn a_failing_batch_in_a_group_fails_alone() {
    let path = temp_db("alone");
    let store = SqliteStorage::open(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut first = Batch::new();
    first.put("g/a", b"1".to_vec());
    let mut second = Batch::new();
    second.require_absent("g/a").put("g/lost", b"x".to_vec());
    let mut third = Batch::new();
    third
        .require_equals("g/a", b"1".to_vec())
        .put("g/b", b"2".to_vec());
    let outcomes = commit_group(&conn, [&first, &second, &third].into_iter());
    assert_eq!(outcomes[0], Ok(()));
    assert_eq!(
        outcomes[1],
        Err(StorageError::Conflict {
            key: "g/a".to_string()
        })
    );
    assert_eq!(outcomes[2], Ok(()));
    let get = |k: &str| futures_executor::block_on(store.get(k)).unwrap();
    assert_eq!(get("g/a"), Some(b"1".to_vec()));
    assert_eq!(get("g/b"), Some(b"2".to_vec()));
    assert_eq!(get("g/lost"), None);
    drop((store, conn));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// Many commits at once from two threads' connections to one file all land, each answered
/// with its own outcome (the conflicting ones refused), and another connection reads them.
#[test]
fn concurrent_commits_from_many_connections_all_land() {
    let path = temp_db("many");
    // The file is created (WAL set, schema made) once, as `lore serve` does before its
    // workers start; then each thread opens its own connection.
    let reader = SqliteStorage::open(&path).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = SqliteStorage::open(&path).unwrap();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async {
                    let store = std::rc::Rc::new(store);
                    let tasks: Vec<_> = (0..64)
                        .map(|i| {
                            let store = store.clone();
                            tokio::task::spawn_local(async move {
                                let mut batch = Batch::new();
                                // Every task claims "g/claimed"; only one of all 128 wins.
                                if i % 16 == 0 {
                                    batch.require_absent("g/claimed").put("g/claimed", vec![t]);
                                }
                                batch.put(format!("g/{t}/{i}"), vec![i]);
                                store.commit(batch).await
                            })
                        })
                        .collect();
                    let mut outcomes = Vec::new();
                    for task in tasks {
                        outcomes.push(task.await.unwrap());
                    }
                    outcomes
                })
            })
        })
        .collect();
    let outcomes: Vec<Vec<Result<(), StorageError>>> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let won: usize = outcomes.iter().flatten().filter(|o| o.is_ok()).count();
    let refused: usize = outcomes
        .iter()
        .flatten()
        .filter(|o| matches!(o, Err(StorageError::Conflict { .. })))
        .count();
    assert_eq!(won + refused, 128);
    assert_eq!(refused, 7, "8 claims of one key, one wins");
    let mut landed = 0;
    for t in 0..2u8 {
        for i in 0..64u8 {
            let v = futures_executor::block_on(reader.get(&format!("g/{t}/{i}"))).unwrap();
            let refused_here = i % 16 == 0 && outcomes[t as usize][i as usize].is_err();
            assert_eq!(v.is_some(), !refused_here, "g/{t}/{i}");
            landed += usize::from(v.is_some());
        }
    }
    assert_eq!(landed, 121);
    drop(reader);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
