// The admin API's answers, as the console reads them (crates/zonekeep-server/src/admin/mod.rs lists
// the routes). Fields a host may leave out are optional.

/** One host of `GET /admin/hosts`. */
export interface HostRow {
  id: string;
  url: string;
  capacity: number;
  zones: number;
  draining: boolean;
  left: boolean;
  heartbeat_age_ms: number | null;
  alive: boolean;
}

/** `GET /admin/hosts`: the fleet, and the answering host's build. */
export interface HostsAnswer {
  self: string;
  hosts: HostRow[];
  version?: string;
  build?: string;
  /** False on a host without a store (a host of its own). */
  fleet?: boolean;
}

/** A zone of `GET /admin/zones`: running on the answering host, or the directory's entry. */
export interface ZoneRow {
  id: string;
  kind: string;
  host: string | null;
  epoch?: number | null;
  running: boolean;
  tier?: string;
  lasting?: boolean;
  tick?: number;
  players?: number;
  observers?: number;
  entities?: number;
  url?: string;
  host_alive?: boolean;
}

/** A zone whose game code failed. */
export interface FailedZone {
  id: string;
  kind: string;
  reason: string;
  tick: number;
  at_start: boolean;
  at_ms: number;
}

/** A lasting world halted because its saves failed. */
export interface HaltedWorld {
  id: string;
  kind: string;
  reason: string;
  tick: number;
  epoch: number;
  unsaved_ms: number;
  at_ms: number;
  attempts: number;
}

/** A zone that did not start for a reason of the store's. */
export interface StartFailure {
  zone_id: string;
  kind: string;
  reason: string;
  at_ms: number;
}

/** `GET /admin/zones`. */
export interface ZonesAnswer {
  host: string | null;
  zones: ZoneRow[];
  failed_zones: FailedZone[];
  halted_worlds: HaltedWorld[];
  start_failures: StartFailure[];
  directory_error: string | null;
}

/** One participant of a zone's detail. */
export interface Participant {
  id: number;
  principal: string;
  name?: string;
  role: string;
  connected: boolean;
  ack: number | null;
  transport?: string | null;
  bytes_out?: number;
  bytes_out_per_s?: number;
  rtt_ms?: number | null;
}

/** One stage's recent durations. */
export interface Stage {
  stage: string;
  count: number;
  p50_us: number;
  p95_us: number;
  max_us: number;
}

/** A zone's save status. */
export interface SaveStatus {
  epoch: number;
  last_saved_seq: number | null;
  last_saved_at_ms: number | null;
  last_submitted_seq: number | null;
  pending: boolean;
  consecutive_failures: number;
  last_error: string | null;
  replaced: number;
  fenced: boolean;
}

/** A zone's saves and facts. */
export interface Persistence {
  save: SaveStatus | null;
  facts_in_flight: number;
  facts_held: number;
  facts_settled: number;
  facts_refused: number;
  last_fact_refusal?: string;
  calls_in_flight: number;
  calls_held: number;
  save_every_ms: number;
}

/** `GET /admin/zones/{id}` of a running zone, or what a host says of a zone it does not run. */
export interface ZoneDetail extends ZoneRow {
  participants?: Participant[];
  persistence?: Persistence;
  stages?: Stage[];
  work?: Record<string, number>;
  last_patch?: Record<string, number>;
  ticks_run?: number;
  last_tick_us?: number;
  max_tick_us?: number;
  mean_tick_us?: number;
  failed?: FailedZone;
  halted?: HaltedWorld;
  start_failure?: StartFailure;
}

/** `GET /admin/zones/{id}/recording`. */
export interface Recording {
  zone: string;
  state: string;
  reason: string | null;
  detail: string | null;
  bytes: number;
  ticks: number;
  max_bytes: number;
  file_complete: boolean;
}

/** `GET /admin/modules`. */
/** One deploy of a module kind, as the store recorded it. */
export interface ModuleDeploy {
  kind: string;
  sha256: string;
  version: number;
  size: number;
  deployed_at_ms: number;
  cause: "push" | "rollback";
}

export interface ModulesAnswer {
  kinds: { kind: string; sha256: string | null }[];
  deploys: ModuleDeploy[];
}

/** `GET /admin/modules/{kind}/history`: what the host runs for the kind, and its newest deploys. */
export interface HistoryAnswer {
  kind: string;
  running: string | null;
  history: ModuleDeploy[];
}

/** What a push or a rollback did. */
export interface DeployOutcome {
  kind: string;
  sha256: string;
  version?: number;
  rolled_back: boolean;
  upgrade: unknown;
  rollback?: unknown;
}
