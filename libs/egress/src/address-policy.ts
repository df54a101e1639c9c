import { BlockList, isIP } from 'node:net';

/** Why an address is not one Kiln may reach on a third party's say-so; null: a public address. */
export type ForbiddenRange =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'unique_local'
  | 'link_local'
  | 'shared'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'reserved'
  | 'not_an_address'
  /** A host name reserved for internal use (below), refused before any lookup. */
  | 'internal_name';

type Range = [network: string, prefix: number, why: ForbiddenRange];

/**
 * IPv4 special-purpose ranges (IANA registry). Listed most specific first: the first match
 * names the reason, so 255.255.255.255 reads as broadcast rather than reserved.
 */
const IPV4_RANGES: Range[] = [
  ['255.255.255.255', 32, 'broadcast'],
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared'], // carrier-grade NAT
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link_local'], // 169.254.169.254 is the cloud metadata service
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'], // benchmarking
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

/**
 * IPv6 ranges checked after the IPv4-embedding forms are unwrapped. Anything outside
 * 2000::/3 (global unicast) is refused as well, so new assignments fail closed.
 */
const IPV6_RANGES: Range[] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b:1::', 48, 'reserved'], // local-use NAT64
  ['100::', 64, 'reserved'], // discard-only
  ['2001:db8::', 32, 'documentation'],
  ['2001::', 23, 'reserved'], // IETF protocol assignments: Teredo, benchmarking, ORCHID
  ['3fff::', 20, 'documentation'],
  ['fc00::', 7, 'unique_local'],
  ['fe80::', 10, 'link_local'],
  ['fec0::', 10, 'reserved'], // deprecated site-local
  ['ff00::', 8, 'multicast'],
];

function blockLists(ranges: Range[], type: 'ipv4' | 'ipv6'): [BlockList, ForbiddenRange][] {
  return ranges.map(([network, prefix, why]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, type);
    return [list, why];
  });
}

const IPV4_LISTS = blockLists(IPV4_RANGES, 'ipv4');
const IPV6_LISTS = blockLists(IPV6_RANGES, 'ipv6');
const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

/**
 * Classifies one literal IP address (as dns.lookup returns it, or as written in a URL without
 * brackets). IPv6 forms that carry an IPv4 address (mapped ::ffff:a.b.c.d, compatible
 * ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by that IPv4 address, since
 * a connection to them can end up at it.
 */
export function forbiddenRange(address: string): ForbiddenRange | null {
  const bare = address.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) does not change the range
  const version = isIP(bare);
  if (version === 4) return ipv4Range(bare);
  if (version !== 6) return 'not_an_address';
  const bytes = ipv6Bytes(bare);
  const embedded = embeddedIpv4(bytes);
  if (embedded) return ipv4Range(embedded.address) ?? (embedded.deprecated ? 'reserved' : null);
  for (const [list, why] of IPV6_LISTS) if (list.check(bare, 'ipv6')) return why;
  return GLOBAL_UNICAST.check(bare, 'ipv6') ? null : 'reserved';
}

function ipv4Range(address: string): ForbiddenRange | null {
  for (const [list, why] of IPV4_LISTS) if (list.check(address, 'ipv4')) return why;
  return null;
}

/**
 * The IPv4 address an IPv6 address wraps, if it is one of the forms that do. NAT64 is how an
 * IPv6-only network reaches IPv4 hosts (DNS64 answers with it), so its public addresses stay
 * reachable; the long-deprecated compatible form (::a.b.c.d) is refused whatever it wraps.
 */
function embeddedIpv4(b: number[]): { address: string; deprecated: boolean } | null {
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const quad = (at: number) => b.slice(at, at + 4).join('.');
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return { address: quad(12), deprecated: false }; // ::ffff:0:0/96
  if (zeros(0, 12) && !zeros(12, 15)) return { address: quad(12), deprecated: true }; // ::/96, except :: and ::1
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) {
    return { address: quad(12), deprecated: false }; // 64:ff9b::/96 NAT64
  }
  if (b[0] === 0x20 && b[1] === 0x02) return { address: quad(2), deprecated: false }; // 2002::/16 6to4
  return null;
}

/** 16 bytes of a valid IPv6 literal (already checked by isIP), with any trailing dotted quad. */
function ipv6Bytes(address: string): number[] {
  let text = address.toLowerCase();
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail.push(...dotted[1].split('.').map(Number));
    text = text.slice(0, -dotted[1].length) + '0:0';
  }
  const [head, rest] = text.split('::');
  const groups = (s: string | undefined) => (s ? s.split(':').filter((g) => g.length > 0) : []);
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const missing = 8 - left.length - right.length;
  const all = [...left, ...Array<string>(rest === undefined ? 0 : missing).fill('0'), ...right];
  const bytes = all.flatMap((g) => {
    const v = parseInt(g, 16);
    return [v >> 8, v & 0xff];
  });
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/**
 * Names that only ever mean something inside a network: `localhost` and `*.localhost`
 * (RFC 6761), `.local` (mDNS, RFC 6762), `.internal` (reserved for private use by ICANN in
 * 2024; `metadata.google.internal` is the cloud metadata service), `.localdomain`,
 * `.home.arpa` (RFC 8375). They are refused by name, before any lookup: a name that does not
 * resolve where Kiln checks it may still resolve where it connects, and these never name a
 * third party. A trailing dot (`localhost.`) is the same name.
 */
const INTERNAL_NAME = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/i;

export function isInternalHostName(host: string): boolean {
  if (isIP(host)) return false;
  return INTERNAL_NAME.test(host.replace(/\.+$/, ''));
}
