//! Change counters shared by every process that opens one database file, so that a process can
//! keep values it read and know, without asking the database, that nobody has written them since.
//!
//! The counters live in a small file beside the database, mapped into memory by each process
//! and only ever read and bumped atomically. A key belongs to one of [`SLOTS`] slots (a fixed
//! hash of its bytes, the same in every process and build), and each slot holds two counters:
//! writes begun and writes ended.
//!
//! - **A writer** bumps `begun` on every slot its commit touches before it commits, and `ended`
//!   after the commit returns, whether it succeeded or not ([`Changes::begin`] and the
//!   [`Writing`] it returns).
//! - **A reader that keeps a value** takes the slot's number ([`Changes::settled`]) before it
//!   reads the database, and keeps the value only when no write of the slot was under way then.
//! - **The kept value stays current** while `begun` still equals that number
//!   ([`Changes::unchanged`]). A write that began after the number was taken changes it, whether
//!   the read saw that write or not. A write that ended before it was taken is in what the read
//!   saw.
//!
//! Two keys that share a slot only cost each other kept values. A process that dies between the
//! two bumps leaves its slots unsettled, so their keys are read from the database: slower,
//! never stale. Every process holds a shared lock on the file while it has it mapped, and the
//! first to open it when nobody else has it settles every slot, since no write can be under way
//! then.
//!
//! This crate exists because no crate keeps counters in shared memory across processes. Mapping
//! the file is `memmap2`'s; the one `unsafe` is seeing the mapped words as atomics.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use memmap2::MmapRaw;

/// Slots per file. A pair of counters is 16 bytes, so the file is 256 KiB and a header.
pub const SLOTS: usize = 1 << 14;

/// The file's first word: its format. A file with another value is refused.
const MAGIC: u64 = u64::from_le_bytes(*b"lorechg1");

/// Words before the first slot: the format, the slot count, and room to grow.
const HEADER_WORDS: usize = 8;

/// The file's length in bytes.
const FILE_BYTES: u64 = ((HEADER_WORDS + 2 * SLOTS) * 8) as u64;

/// The counters of one database file, mapped into this process.
pub struct Changes {
    map: MmapRaw,
    /// Held open for its shared lock, which tells a later opener that this process may write.
    _file: std::fs::File,
}

/// The slot a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(usize);

impl Slot {
    /// The slot of `key`: FNV-1a over its bytes, so every process and every build agrees.
    pub fn of(key: &[u8]) -> Slot {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in key {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        // The low bits of FNV-1a mix the last bytes least; fold the high half in.
        Slot(((hash ^ (hash >> 32)) as usize) % SLOTS)
    }
}

impl Changes {
    /// Opens the counters file at `path`, creating it (all counters zero) when it is missing.
    /// Fails on a file of another format or size.
    pub fn open(path: &Path) -> io::Result<Changes> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        if len < FILE_BYTES {
            // Zero-filled; another process that creates it at once sets the same length.
            file.set_len(FILE_BYTES)?;
        } else if len > FILE_BYTES {
            return Err(unknown(path, "it is larger than this format"));
        }
        // Alone with the file (no process holds its shared lock), nothing can be mid-write.
        let alone = file.try_lock().is_ok();
        let map = MmapRaw::map_raw(&file)?;
        if map.len() < FILE_BYTES as usize {
            return Err(unknown(path, "it maps shorter than this format"));
        }
        let changes = Changes { map, _file: file };
        for (word, value) in [(0, MAGIC), (1, SLOTS as u64)] {
            let found = match changes
                .word(word)
                .compare_exchange(0, value, SeqCst, SeqCst)
            {
                Ok(_) => value,
                Err(found) => found,
            };
            if found != value {
                return Err(unknown(path, "its header is not this format's"));
            }
        }
        if alone {
            // Slots a process left mid-write when it died: settled, as their writes ended.
            for slot in 0..SLOTS {
                let begun = changes.begun(Slot(slot)).load(SeqCst);
                changes.ended(Slot(slot)).store(begun, SeqCst);
            }
        }
        // Held while mapped (an exclusive lock is turned into it). A process resetting the slots
        // holds the exclusive lock, so this waits for it.
        changes._file.lock_shared()?;
        Ok(changes)
    }

    /// The word at `index` of the mapping.
    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(
            index < HEADER_WORDS + 2 * SLOTS,
            "word {index} is past the file"
        );
        let base = self.map.as_mut_ptr().cast::<u64>();
        // SAFETY: `open` checked that the mapping holds every word up to the last slot's, and
        // the index is checked above, so the pointer is inside it. The mapping starts on a page
        // boundary, so every word is 8-byte aligned. It lives as long as `self`, which the
        // returned reference borrows. Every process touches these words only through atomics
        // (this crate), so no non-atomic access races with them.
        unsafe { AtomicU64::from_ptr(base.add(index)) }
    }

    fn begun(&self, slot: Slot) -> &AtomicU64 {
        self.word(HEADER_WORDS + 2 * slot.0)
    }

    fn ended(&self, slot: Slot) -> &AtomicU64 {
        self.word(HEADER_WORDS + 2 * slot.0 + 1)
    }

    /// The slot's number when no write of it is under way, to keep with a value read after this
    /// call; `None` while a write is under way (the value may not be kept).
    pub fn settled(&self, slot: Slot) -> Option<u64> {
        let ended = self.ended(slot).load(SeqCst);
        let begun = self.begun(slot).load(SeqCst);
        (begun == ended).then_some(begun)
    }

    /// Whether no write of the slot has begun since `settled` answered `since`.
    pub fn unchanged(&self, slot: Slot, since: u64) -> bool {
        self.begun(slot).load(SeqCst) == since
    }

    /// Marks a write of `keys` as begun, before it is committed; the write is marked ended when
    /// the returned guard is dropped, which must be after the commit has returned.
    pub fn begin<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Writing<'_> {
        let mut slots: Vec<Slot> = keys.into_iter().map(Slot::of).collect();
        slots.sort_unstable();
        slots.dedup();
        for slot in &slots {
            self.begun(*slot).fetch_add(1, SeqCst);
        }
        Writing {
            changes: self,
            slots,
        }
    }

    /// How many slots have a write under way (or were left so by a process that died).
    pub fn unsettled(&self) -> usize {
        (0..SLOTS)
            .filter(|s| self.settled(Slot(*s)).is_none())
            .count()
    }
}

fn unknown(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is not a lore change-counter file: {why}",
            path.display()
        ),
    )
}

/// A write under way: dropping it marks the write ended on each of its slots.
#[must_use = "the write is marked ended when this is dropped, after the commit"]
pub struct Writing<'a> {
    changes: &'a Changes,
    slots: Vec<Slot>,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        for slot in &self.slots {
            self.changes.ended(*slot).fetch_add(1, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("lore-changes-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_write_in_one_mapping_is_seen_by_another() {
        let dir = Dir::new("two");
        let path = dir.0.join("db-changes");
        // Two mappings of one file stand for two processes.
        let (one, two) = (Changes::open(&path).unwrap(), Changes::open(&path).unwrap());
        let key = Slot::of(b"o/acme/auth");
        let kept = two.settled(key).expect("nothing is being written");
        assert!(two.unchanged(key, kept));
        let writing = one.begin([b"o/acme/auth".as_slice(), b"o/acme/auth"]);
        assert_eq!(two.settled(key), None, "a write is under way");
        assert!(!two.unchanged(key, kept), "a write began");
        drop(writing);
        let after = two.settled(key).expect("the write ended");
        assert_eq!(after, kept + 1, "a key named twice is bumped once");
        assert!(!two.unchanged(key, kept));
        assert!(two.unchanged(key, after));
    }

    #[test]
    fn a_write_of_another_slot_leaves_a_kept_value_current() {
        let dir = Dir::new("other");
        let changes = Changes::open(&dir.0.join("db-changes")).unwrap();
        let (a, b) = (
            b"o/acme/auth".as_slice(),
            b"o/acme/usage/2026-12-06".as_slice(),
        );
        assert_ne!(Slot::of(a), Slot::of(b));
        let kept = changes.settled(Slot::of(a)).unwrap();
        drop(changes.begin([b]));
        assert!(changes.unchanged(Slot::of(a), kept));
    }

    #[test]
    fn a_dead_writers_slot_stays_unsettled_until_the_file_is_opened_alone() {
        let dir = Dir::new("reopen");
        let path = dir.0.join("db-changes");
        let changes = Changes::open(&path).unwrap();
        drop(changes.begin([b"k".as_slice()]));
        // A writer that dies between the bumps: its guard is never dropped.
        std::mem::forget(changes.begin([b"stuck".as_slice()]));
        // Another process opens the file while this one still has it: the slot may be mid-write.
        let other = Changes::open(&path).unwrap();
        assert_eq!(
            other.settled(Slot::of(b"k")),
            Some(1),
            "counters are shared"
        );
        assert_eq!(other.settled(Slot::of(b"stuck")), None);
        assert_eq!(other.unsettled(), 1);
        drop((changes, other));
        // Opened by nobody else: no write can be under way.
        let alone = Changes::open(&path).unwrap();
        assert_eq!(alone.settled(Slot::of(b"k")), Some(1));
        assert_eq!(alone.settled(Slot::of(b"stuck")), Some(1));
        assert_eq!(alone.unsettled(), 0);
        // And its shared lock keeps the next opener from settling what it writes.
        let writing = alone.begin([b"k".as_slice()]);
        let next = Changes::open(&path).unwrap();
        assert_eq!(next.settled(Slot::of(b"k")), None);
        drop(writing);
        assert_eq!(next.settled(Slot::of(b"k")), Some(2));
    }

    #[test]
    fn a_file_of_another_format_is_refused() {
        let dir = Dir::new("format");
        let short = dir.0.join("short");
        std::fs::write(&short, b"not counters").unwrap();
        let err = Changes::open(&short).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("header"), "{err}");
        let long = dir.0.join("long");
        std::fs::write(&long, vec![0u8; FILE_BYTES as usize + 1]).unwrap();
        assert!(Changes::open(&long).is_err());
    }

    #[test]
    fn slots_spread_keys() {
        let used: std::collections::HashSet<Slot> = (0..1000)
            .map(|i| Slot::of(format!("o/org{i}/auth").as_bytes()))
            .collect();
        assert!(used.len() > 950, "{} slots for 1000 keys", used.len());
    }
}
