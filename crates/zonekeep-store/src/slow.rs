//! A decorator that makes every write slow, for the slow-storage test and benchmark.
//!
//! It wraps real stores and really waits before each write, so the host sees exactly what a slow
//! disk or a distant database looks like from the outside: calls that take long but succeed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use zonekeep_fleet::Timing;

use crate::calls::{CallAnswer, CallBegin, CallFinish, CallRecord, CallStore, StoredCall};
use crate::characters::{CharacterAcquire, CharacterStore, StoredCharacter};
use crate::directory::{
    ClaimRequest, Directory, HostRecord, HostRegistration, ZoneClaim, ZoneLocation,
};
use crate::error::Result;
use crate::traits::{FactLedger, ModuleStore, SaveStore};
use crate::transfers::{NewTransfer, Reclaim, StoredTransfer, TransferLedger};
use crate::types::{
    Claim, DeployCause, FactRecord, FactResult, ModuleDeploy, SaveMeta, SaveRecord, StoredFact,
    WriteOutcome,
};
use crate::Store;

/// Delays every write (`claim`, `write`, `delete`, `record`, every directory call that changes a
/// row: registering, heartbeats, leaving, claiming, moving, releasing, forgetting, and storing and
/// deploying modules, every transfer change, acquiring, committing and releasing characters, and
/// beginning, finishing and sweeping calls) by a fixed duration, then delegates. Reads pass through
/// undelayed.
#[derive(Clone)]
pub struct SlowStore {
    saves: Arc<dyn SaveStore>,
    facts: Arc<dyn FactLedger>,
    directory: Arc<dyn Directory>,
    modules: Arc<dyn ModuleStore>,
    transfers: Arc<dyn TransferLedger>,
    characters: Arc<dyn CharacterStore>,
    calls: Arc<dyn CallStore>,
    delay: Duration,
}

impl std::fmt::Debug for SlowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowStore")
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

impl SlowStore {
    /// Wraps the parts of a store.
    pub fn new(store: &Store, delay: Duration) -> Self {
        SlowStore {
            saves: Arc::clone(&store.saves),
            facts: Arc::clone(&store.facts),
            directory: Arc::clone(&store.directory),
            modules: Arc::clone(&store.modules),
            transfers: Arc::clone(&store.transfers),
            characters: Arc::clone(&store.characters),
            calls: Arc::clone(&store.calls),
            delay,
        }
    }

    /// Wraps a whole [`Store`] and returns it as a [`Store`], keeping its description (with the
    /// delay noted) so logs say the storage is deliberately slowed.
    pub fn wrap(store: Store, delay: Duration) -> Store {
        let slow = Arc::new(SlowStore::new(&store, delay));
        Store {
            saves: Arc::clone(&slow) as Arc<dyn SaveStore>,
            facts: Arc::clone(&slow) as Arc<dyn FactLedger>,
            directory: Arc::clone(&slow) as Arc<dyn Directory>,
            modules: Arc::clone(&slow) as Arc<dyn ModuleStore>,
            transfers: Arc::clone(&slow) as Arc<dyn TransferLedger>,
            characters: Arc::clone(&slow) as Arc<dyn CharacterStore>,
            calls: slow,
            // The lobby, the matchmaker, the boards, presence and chat are not part of what a
            // slow store slows.
            lobby: store.lobby,
            matches: store.matches,
            boards: store.boards,
            presence: store.presence,
            chat: store.chat,
            description: format!("{} (slowed by {delay:?} per write)", store.description),
        }
    }

    /// The delay applied to each write.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

#[async_trait]
impl SaveStore for SlowStore {
    async fn claim(&self, zone_id: &str) -> Result<Claim> {
        tokio::time::sleep(self.delay).await;
        self.saves.claim(zone_id).await
    }

    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> Result<WriteOutcome> {
        tokio::time::sleep(self.delay).await;
        self.saves.write(zone_id, epoch, seq, kind, bytes).await
    }

    async fn load(&self, zone_id: &str) -> Result<Option<SaveRecord>> {
        self.saves.load(zone_id).await
    }

    async fn list(&self) -> Result<Vec<SaveMeta>> {
        self.saves.list().await
    }

    async fn delete(&self, zone_id: &str) -> Result<bool> {
        tokio::time::sleep(self.delay).await;
        self.saves.delete(zone_id).await
    }
}

#[async_trait]
impl FactLedger for SlowStore {
    async fn record(&self, fact: &FactRecord) -> Result<FactResult> {
        tokio::time::sleep(self.delay).await;
        self.facts.record(fact).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredFact>> {
        self.facts.get(key).await
    }

    async fn totals(&self, principal: &str) -> Result<BTreeMap<String, i64>> {
        self.facts.totals(principal).await
    }

    async fn count(&self) -> Result<u64> {
        self.facts.count().await
    }
}

#[async_trait]
impl Directory for SlowStore {
    async fn register_host(&self, host: &HostRegistration, silent_after: Duration) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        self.directory.register_host(host, silent_after).await
    }

    async fn heartbeat(
        &self,
        host_id: &str,
        incarnation: &str,
        draining: bool,
        timing: Timing,
    ) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        self.directory
            .heartbeat(host_id, incarnation, draining, timing)
            .await
    }

    async fn leave_host(&self, host_id: &str, incarnation: &str) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        self.directory.leave_host(host_id, incarnation).await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>> {
        self.directory.hosts().await
    }

    async fn locate(&self, zone_id: &str, timing: Timing) -> Result<Option<ZoneLocation>> {
        self.directory.locate(zone_id, timing).await
    }

    async fn zones(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        self.directory.zones(timing, limit).await
    }

    async fn claim_zone(&self, req: &ClaimRequest<'_>) -> Result<ZoneClaim> {
        tokio::time::sleep(self.delay).await;
        self.directory.claim_zone(req).await
    }

    async fn move_zone(&self, zone_id: &str, from: &str, from_epoch: u64, to: &str) -> Result<u64> {
        tokio::time::sleep(self.delay).await;
        self.directory
            .move_zone(zone_id, from, from_epoch, to)
            .await
    }

    async fn release_zone(&self, zone_id: &str, host: &str, epoch: u64) -> Result<bool> {
        tokio::time::sleep(self.delay).await;
        self.directory.release_zone(zone_id, host, epoch).await
    }

    async fn orphans(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        self.directory.orphans(timing, limit).await
    }

    async fn forget_zone(&self, zone_id: &str) -> Result<bool> {
        tokio::time::sleep(self.delay).await;
        self.directory.forget_zone(zone_id).await
    }

    async fn spend_ticket(&self, jti: &str, expires_at_ms: u64) -> Result<bool> {
        tokio::time::sleep(self.delay).await;
        self.directory.spend_ticket(jti, expires_at_ms).await
    }
}

#[async_trait]
impl ModuleStore for SlowStore {
    async fn put_module(&self, bytes: &[u8]) -> Result<String> {
        tokio::time::sleep(self.delay).await;
        self.modules.put_module(bytes).await
    }

    async fn get_module(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        self.modules.get_module(sha256).await
    }

    async fn deploy_module(
        &self,
        kind: &str,
        sha256: &str,
        cause: DeployCause,
    ) -> Result<ModuleDeploy> {
        tokio::time::sleep(self.delay).await;
        self.modules.deploy_module(kind, sha256, cause).await
    }

    async fn module_kinds(&self) -> Result<Vec<ModuleDeploy>> {
        self.modules.module_kinds().await
    }

    async fn module_history(&self, kind: &str, limit: usize) -> Result<Vec<ModuleDeploy>> {
        self.modules.module_history(kind, limit).await
    }
}

#[async_trait]
impl TransferLedger for SlowStore {
    async fn begin_transfer(&self, transfer: &NewTransfer) -> Result<StoredTransfer> {
        tokio::time::sleep(self.delay).await;
        self.transfers.begin_transfer(transfer).await
    }

    async fn accept_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        tokio::time::sleep(self.delay).await;
        self.transfers.accept_transfer(id, target_epoch).await
    }

    async fn return_transfer(
        &self,
        id: &str,
        zone_id: &str,
        epoch: u64,
        reason: &str,
    ) -> Result<StoredTransfer> {
        tokio::time::sleep(self.delay).await;
        self.transfers
            .return_transfer(id, zone_id, epoch, reason)
            .await
    }

    async fn arrive_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        tokio::time::sleep(self.delay).await;
        self.transfers.arrive_transfer(id, target_epoch).await
    }

    async fn transfer(&self, id: &str) -> Result<Option<StoredTransfer>> {
        self.transfers.transfer(id).await
    }

    async fn open_transfers(&self, zone_id: &str) -> Result<Vec<StoredTransfer>> {
        self.transfers.open_transfers(zone_id).await
    }

    async fn latest_transfer_from(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        self.transfers
            .latest_transfer_from(source_zone, principal, since_ms)
            .await
    }

    async fn reclaim_transfer(&self, id: &str, source_epoch: u64) -> Result<Reclaim> {
        tokio::time::sleep(self.delay).await;
        self.transfers.reclaim_transfer(id, source_epoch).await
    }

    async fn release_reclaim(&self, id: &str, source_epoch: u64) -> Result<StoredTransfer> {
        tokio::time::sleep(self.delay).await;
        self.transfers.release_reclaim(id, source_epoch).await
    }

    async fn unclaimed_return(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        self.transfers
            .unclaimed_return(source_zone, principal, since_ms)
            .await
    }

    async fn prune_transfers(&self, before_ms: u64) -> Result<u64> {
        tokio::time::sleep(self.delay).await;
        self.transfers.prune_transfers(before_ms).await
    }
}

#[async_trait]
impl CharacterStore for SlowStore {
    async fn acquire_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
    ) -> Result<CharacterAcquire> {
        tokio::time::sleep(self.delay).await;
        self.characters
            .acquire_character(principal, zone, epoch)
            .await
    }

    async fn commit_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: &[u8],
    ) -> Result<u64> {
        tokio::time::sleep(self.delay).await;
        self.characters
            .commit_character(principal, zone, epoch, data)
            .await
    }

    async fn release_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: Option<&[u8]>,
    ) -> Result<u64> {
        tokio::time::sleep(self.delay).await;
        self.characters
            .release_character(principal, zone, epoch, data)
            .await
    }

    async fn load_character(&self, principal: &str) -> Result<Option<StoredCharacter>> {
        self.characters.load_character(principal).await
    }
}

#[async_trait]
impl CallStore for SlowStore {
    async fn begin_call(&self, call: &CallRecord) -> Result<CallBegin> {
        tokio::time::sleep(self.delay).await;
        self.calls.begin_call(call).await
    }

    async fn finish_call(
        &self,
        zone_id: &str,
        key: &str,
        epoch: Option<u64>,
        answer: &CallAnswer,
    ) -> Result<CallFinish> {
        tokio::time::sleep(self.delay).await;
        self.calls.finish_call(zone_id, key, epoch, answer).await
    }

    async fn get_call(&self, zone_id: &str, key: &str) -> Result<Option<StoredCall>> {
        self.calls.get_call(zone_id, key).await
    }

    async fn sweep_calls(&self, keep: Duration) -> Result<u64> {
        tokio::time::sleep(self.delay).await;
        self.calls.sweep_calls(keep).await
    }

    async fn count_calls(&self) -> Result<u64> {
        self.calls.count_calls().await
    }
}
