/**
 * What a {@link ZoneConnection} is given and what it tells: its options, the sockets and the
 * transport memory it is handed, the events it emits and what each carries ({@link CloseInfo},
 * {@link WelcomeInfo}, {@link DeltaInfo}, {@link TransferInfo}, …), its lifecycle states and its
 * counters.
 */
/** The {@link TransportMemory} key under which the transport chosen for `entryUrl` is kept. */
export function transportMemoryKey(entryUrl) {
    return `zonekeep.transport:${entryUrl}`;
}
