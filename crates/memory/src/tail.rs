//! Segments written from the events past the stored ones, by an instance that has not loaded
//! the org's index: a Spin request that saved, an isolate or a server that only ever saves.
//! Without this, an org that is written to and not searched grows an ever longer tail of events
//! that the next fresh instance must read and tokenize (at 100,000 saved memories, one search
//! would replay all of them).
//!
//! A save whose event sequence number crossed a multiple of [`SEGMENT_EVENTS`] marks its org;
//! after the answer (or before it, where the host has no background work) the instance reads
//! the manifest and the events past it, and writes them as a new segment, merged as
//! `segments::plan` merges: with the newest stored segments of its size tier, whose parts it
//! reads for that. Events committed by a script's run mark their org whatever their count (the
//! run's save counted them in its own overlay). The write is conditional on the manifest it
//! read, like every segment write; losing that race or finding unusable segments leaves the
//! events to the next write or to the loaded index's rebuild.

use std::collections::HashMap;

use super::keyword::KeywordIndex;
use super::refresh::{events_after_at_most, stored_seq};
use super::segments::{self, SEGMENT_EVENTS, Unusable, Vectors};
use super::semantic::model_key;
use super::service::MemoryService;
use super::sketch;
use super::vector::{decode as decode_vector, sketch_of};
use lore_base::error::Result;
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::ports::Ports;

/// Events one tail write takes at most: an org with a long history and no segments (stored
/// before segments existed, or after a reindex) catches up over several writes.
pub const MAX_TAIL_EVENTS: usize = 4096;

impl MemoryService {
    /// Notes that a commit took the org's event sequence number from `from` to `to`.
    pub(super) fn note_committed(&self, keys: &OrgKeys, from: u64, to: u64) {
        let n = u64::from(SEGMENT_EVENTS);
        if from / n != to / n {
            self.mark_tail(keys);
        }
    }

    /// Marks the org for a look at its tail after this request.
    pub fn mark_tail(&self, keys: &OrgKeys) {
        self.tail_due.borrow_mut().insert(keys.root().to_string());
    }

    /// Whether the org is marked for a tail write (taking the mark).
    pub fn take_tail_mark(&self, keys: &OrgKeys) -> bool {
        self.tail_due.borrow_mut().remove(keys.root())
    }

    /// Writes the events past `org`'s stored segments as a new segment when there are at least
    /// [`SEGMENT_EVENTS`] of them. Never fails a request: a problem is logged.
    pub async fn persist_tail(&self, ports: &Ports, org: &OrgId, keys: &OrgKeys) {
        if let Err(e) = self.write_tail(ports, keys).await {
            tracing::warn!(error = %e, org = %org, "could not store a keyword index segment");
        }
    }

    /// [`Self::persist_tail`], with its error.
    async fn write_tail(&self, ports: &Ports, keys: &OrgKeys) -> Result<()> {
        let (seq, _) = stored_seq(ports, keys).await?;
        let (mut kept, known) = match segments::read_manifest(ports, keys, seq).await? {
            Ok((manifest, raw)) => (manifest.segments, Some(raw)),
            Err(Unusable { why: None, .. }) => (Vec::new(), None),
            // Unusable segments are replaced by a loaded index's rebuild (which reads them
            // all to say why); a tail cannot stand on them.
            Err(Unusable { why: Some(_), .. }) => return Ok(()),
        };
        let from = kept.last().map_or(0, |s| s.to_seq);
        if seq.saturating_sub(from) < u64::from(SEGMENT_EVENTS) {
            return Ok(());
        }
        let (events, last) = events_after_at_most(ports, keys, from, MAX_TAIL_EVENTS).await?;
        let Ok(new_docs) = u32::try_from(events.len()) else {
            return Ok(());
        };
        if new_docs < SEGMENT_EVENTS {
            return Ok(());
        }
        let merged = segments::merging(&mut kept, new_docs);
        let wanted: Vec<String> = merged.iter().flat_map(|s| s.part_keys(keys)).collect();
        let stored = ports.storage.get_many(&wanted).await?;
        let mut parts: HashMap<&str, Vec<u8>> = wanted
            .iter()
            .map(String::as_str)
            .zip(stored)
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        let part = |key: &str| parts.get(key).map(Vec::as_slice);
        let mut index = KeywordIndex::default();
        for segment in &merged {
            if let Err(why) = segments::append_segment(&mut index, keys, segment, part) {
                tracing::warn!(
                    why,
                    "a stored keyword index segment is unusable; not merging"
                );
                return Ok(());
            }
        }
        for event in &events {
            index.insert(&self.tokenizer, event);
        }
        index.seq = last;
        // The sketches: the merged segments' as stored, the others' from their stored vectors
        // (a document without one has no sketch, as in a loaded index).
        let mut codes: Vec<Option<Vec<u8>>> = vec![None; index.len()];
        let model = ports
            .embedder
            .as_ref()
            .map(|e| (model_key(e.model_id()), e.dimensions()));
        if let Some((model_key, dims)) = &model {
            let mut at = 0usize;
            for segment in &merged {
                let codes = &mut codes[at..at + segment.docs as usize];
                match segment.take_sketch(keys, model_key, *dims, &mut parts) {
                    Ok(Some(sketch::Stored::Flat(sketch))) => {
                        for (doc, code) in sketch.codes() {
                            codes[doc as usize] = Some(code.to_vec());
                        }
                    }
                    Ok(Some(sketch::Stored::Clustered(directory))) => {
                        for c in 0..directory.clusters() {
                            let key = keys.keyword_sketch_cluster(model_key, &segment.id, c);
                            let Some(sealed) = parts.remove(key.as_str()) else {
                                continue;
                            };
                            let size = (c, directory.size(c));
                            let Ok(cluster) =
                                segment.open_cluster(keys, model_key, *dims, size, sealed)
                            else {
                                continue;
                            };
                            for (member, code) in cluster.sketch.codes() {
                                codes[cluster.docs[member as usize] as usize] = Some(code.to_vec());
                            }
                        }
                    }
                    _ => {}
                }
                at += segment.docs as usize;
            }
            // The new documents' codes, and any a merged segment's sketch did not give (one
            // that does not open, or a cluster missing), from their stored vectors.
            let missing: Vec<usize> = (0..index.len()).filter(|&d| codes[d].is_none()).collect();
            let vector_keys: Vec<String> = missing
                .iter()
                .map(|&d| {
                    let id = &index.docs[d].meta.id;
                    keys.vector(model_key, id.strip_prefix("evt_").unwrap_or(""))
                })
                .collect();
            let vectors = ports.storage.get_many(&vector_keys).await?;
            for (&d, bytes) in missing.iter().zip(vectors) {
                codes[d] = bytes
                    .and_then(|b| decode_vector(&b, *dims))
                    .map(|v| sketch_of(&v));
            }
        }
        let bits = |doc: u32| codes.get(doc as usize).cloned().flatten();
        let vectors = model.as_ref().map(|(model_key, dims)| Vectors {
            model_key,
            dims: *dims,
            bits: &bits,
        });
        let id = ports.random_hex(8);
        let Some(plan) = segments::plan_apart(
            &index,
            kept,
            &merged,
            known.as_deref(),
            keys,
            &id,
            vectors.as_ref(),
        ) else {
            return Ok(());
        };
        // A manifest another instance changed first leaves its segments standing.
        segments::write(ports, keys, plan).await?;
        Ok(())
    }
}
