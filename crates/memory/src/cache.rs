//! A byte-bounded cache of events by org and id. Events are append-only and never change, so a
//! cached event is never stale; the cache only saves the storage read of a search hit. It is
//! keyed by the org too: an id is unique only as long as nothing brings in another org's ids
//! (an operator's import of a crafted export could), and one org's text must never answer for
//! another's.

use std::rc::Rc;

use lru::LruCache;

use super::event::Event;

pub struct EventCache {
    entries: LruCache<String, (Rc<Event>, usize)>,
    bytes: usize,
    max_bytes: usize,
}

/// What an event costs in the cache: its text and payload plus a fixed overhead.
fn cost(event: &Event) -> usize {
    256 + event.content.len()
        + event.payload.as_ref().map_or(0, |p| p.to_string().len())
        + event.entity_ids.iter().map(|e| e.len() + 24).sum::<usize>()
}

impl EventCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            entries: LruCache::unbounded(),
            bytes: 0,
            max_bytes,
        }
    }

    pub fn get(&mut self, org: &str, id: &str) -> Option<Rc<Event>> {
        self.entries
            .get(&format!("{org}/{id}"))
            .map(|(e, _)| e.clone())
    }

    pub fn insert(&mut self, org: &str, event: Rc<Event>) {
        let size = cost(&event);
        if size > self.max_bytes / 8 {
            return;
        }
        let key = format!("{org}/{}", event.id);
        if let Some((_, old)) = self.entries.put(key, (event, size)) {
            self.bytes -= old;
        }
        self.bytes += size;
        while self.bytes > self.max_bytes {
            match self.entries.pop_lru() {
                Some((_, (_, s))) => self.bytes -= s,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, len: usize) -> Rc<Event> {
        Rc::new(Event {
            id: id.into(),
            kind: "note".into(),
            content: "x".repeat(len),
            payload: None,
            entity_ids: vec![],
            author: "usr_a".into(),
            supersedes_event_id: None,
            origin_id: None,
            occurred_at_ms: None,
            created_at_ms: 0,
        })
    }

    #[test]
    fn evicts_least_recently_used_past_the_byte_bound() {
        let mut cache = EventCache::new(100_000);
        for i in 0..10 {
            cache.insert("acme", event(&format!("e{i}"), 10_000));
        }
        assert!(cache.bytes <= 100_000);
        assert!(cache.get("acme", "e0").is_none(), "oldest evicted");
        assert!(cache.get("acme", "e9").is_some());
        assert!(
            cache.get("globex", "e9").is_none(),
            "another org's id is another entry"
        );
        cache.insert("acme", event("huge", 20_000));
        assert!(
            cache.get("acme", "huge").is_none(),
            "an entry over an eighth of the bound is not kept"
        );
    }
}
