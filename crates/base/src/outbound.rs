//! Where an outbound request may go, decided by the address it connects to: a request made
//! for someone who is not the operator (a member's connection, an outsider's client document)
//! reaches only public addresses, whatever its URL spells ([`Reach`], [`Policy`]). Natively the
//! check runs on every address a name resolves to, and the connection uses only those that
//! passed (`src/outbound.rs`); at the edge, where the platform resolves names, on every address
//! written into a URL (the front's guard), and the platform keeps names off private networks.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use ipnet::IpNet;

/// Which addresses an outbound request may connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Public addresses only (globally routable unicast), and those the operator allows
    /// (`LORE_OUTBOUND_ALLOW`): what a member, an admin or an outsider names.
    Public,
    /// As `Public`, and loopback addresses: a client metadata document named to a server whose
    /// own public URL is on loopback (local development).
    PublicOrLoopback,
    /// Anywhere: a URL the operator configured (an embeddings endpoint, an identity provider)
    /// or the CLI's own server.
    Configured,
}

/// Whose share of the outbound requests in flight one counts against: a slow or silent peer
/// holds only its caller's share, never the server's serving threads or another org's share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Share {
    /// An org's (its connections, its feeds, its scripts' calls).
    Org(String),
    /// An unauthenticated client's, by its address (an OAuth client document, a sign-in).
    Address(String),
    /// The server's own (embeddings, the CLI).
    Server,
}

/// The operator's additions to [`Reach::Public`]: networks it allows although they are not
/// public (a private API on the LAN; loopback in tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub allow: Vec<IpNet>,
}

impl Policy {
    /// Parses `LORE_OUTBOUND_ALLOW`: networks (`10.0.0.0/8`) or addresses (`127.0.0.1`),
    /// separated by commas.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut allow = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{item:?} is not a network (10.0.0.0/8) or an address"))?;
            allow.push(net);
        }
        Ok(Self { allow })
    }

    /// Whether a request of `reach` may connect to `addr`.
    pub fn permits(&self, reach: Reach, addr: IpAddr) -> bool {
        let addr = canonical(addr);
        match reach {
            Reach::Configured => true,
            Reach::PublicOrLoopback if addr.is_loopback() => true,
            Reach::Public | Reach::PublicOrLoopback => {
                is_public(addr) || self.allow.iter().any(|net| net.contains(&addr))
            }
        }
    }
}

/// The IPv4 address an IPv6 address carries, where it is only a way of writing one (mapped,
/// compatible, NAT64, 6to4): such an address is what its IPv4 address is.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated; not :: or ::1).
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        // 64:ff9b::/96 (NAT64) and 64:ff9b:1::/48 (local NAT64).
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, _, _, _, _, _] => Some(tail),
        // 2002:AABB:CCDD::/48 (6to4).
        [0x2002, a, b, _, _, _, _, _] => {
            let [a1, a2] = a.to_be_bytes();
            let [b1, b2] = b.to_be_bytes();
            Some(Ipv4Addr::new(a1, a2, b1, b2))
        }
        _ => None,
    }
}

/// `addr` in the form that says what it is: an IPv6 address that only writes an IPv4 one, as
/// that IPv4 address.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `addr` is a public, globally routable unicast address: not this machine, not a
/// private, shared, link-local, multicast, documentation, benchmarking or reserved range (the
/// IANA special-purpose registries), judged on its [`canonical`] form.
pub fn is_public(addr: IpAddr) -> bool {
    match canonical(addr) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || a >= 240
                // 100.64.0.0/10 shared address space (carrier-grade NAT).
                || (a == 100 && (64..128).contains(&b))
                // 192.0.0.0/24 IETF protocol assignments.
                || (a == 192 && b == 0 && c == 0)
                // 198.18.0.0/15 benchmarking.
                || (a == 198 && (b == 18 || b == 19)))
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            // Global unicast is 2000::/3; within it, the special-purpose blocks are not public.
            (s[0] & 0xe000) == 0x2000
                // 2001::/23 IETF protocol assignments (Teredo 2001::/32, benchmarking, ORCHID).
                && !(s[0] == 0x2001 && s[1] < 0x0200)
                // 2001:db8::/32 and 3fff::/20 documentation.
                && !(s[0] == 0x2001 && s[1] == 0x0db8)
                && !(s[0] == 0x3fff && s[1] < 0x1000)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_are_public_in_every_spelling() {
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(public)), "{public}");
        }
        for private in [
            "127.0.0.1",
            "127.255.255.254",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "192.0.2.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "fec0::1",
            // IPv4 written as IPv6: mapped, compatible, NAT64, 6to4, Teredo.
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(private)), "{private}");
        }
    }

    #[test]
    fn reach_decides_with_the_operators_networks() {
        let none = Policy::default();
        let lan = Policy::parse("10.0.0.0/8, 127.0.0.1").unwrap();
        let loopback = ip("::ffff:127.0.0.1");
        assert!(!none.permits(Reach::Public, loopback));
        assert!(none.permits(Reach::PublicOrLoopback, loopback));
        assert!(none.permits(Reach::Configured, loopback));
        assert!(lan.permits(Reach::Public, loopback));
        assert!(lan.permits(Reach::Public, ip("10.9.8.7")));
        assert!(!lan.permits(Reach::Public, ip("127.0.0.2")));
        assert!(!lan.permits(Reach::Public, ip("192.168.0.1")));
        assert!(!none.permits(Reach::PublicOrLoopback, ip("192.168.0.1")));
        assert!(Policy::parse("10.0.0.0/33").is_err());
        assert!(Policy::parse("localhost").is_err());
    }
}
