//! The kernel's own UDP counters, from /proc (Linux).

use std::fs;

/// The inode of a socket, as /proc/net/udp lists it (Linux's).
pub fn socket_inode(sock: &impl crate::sys::Sock) -> Option<u64> {
    crate::sys::socket_inode(sock)
}

/// The drops column of /proc/net/udp and /proc/net/udp6 for the socket with
/// this inode: datagrams that socket dropped, above all for lack of receive
/// buffer space. Exact, and for this socket alone.
pub fn udp_socket_drops(inode: u64) -> Option<u64> {
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .find_map(|text| drops_in(&text, inode))
}

/// [`udp_socket_drops`] of many sockets, the tables read once: each
/// socket's drops, in order (`None` where it has no inode or no line).
pub fn udp_sockets_drops(inodes: &[Option<u64>]) -> Vec<Option<u64>> {
    let mut found = std::collections::HashMap::new();
    for text in ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
    {
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if let (Some(Ok(ino)), Some(Ok(drops))) = (
                cols.get(9).map(|c| c.parse::<u64>()),
                cols.last().map(|c| c.parse::<u64>()),
            ) {
                found.insert(ino, drops);
            }
        }
    }
    inodes
        .iter()
        .map(|i| i.and_then(|i| found.get(&i).copied()))
        .collect()
}

fn drops_in(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        let ino: u64 = cols.get(9)?.parse().ok()?;
        if ino != inode {
            return None;
        }
        cols.last()?.parse().ok()
    })
}

/// A counter of the `Udp:` (or `Udp6`) lines of /proc/net/snmp and
/// /proc/net/snmp6, summed over both families: e.g. "RcvbufErrors",
/// "InErrors", "InDatagrams".
pub fn host_udp_counter(name: &str) -> Option<u64> {
    let mut total = None;
    if let Ok(text) = fs::read_to_string("/proc/net/snmp") {
        total = snmp_value(&text, "Udp:", name);
    }
    if let Ok(text) = fs::read_to_string("/proc/net/snmp6") {
        let key = format!("Udp6{name}");
        if let Some(v) = text.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next()? == key).then(|| it.next()?.parse::<u64>().ok())?
        }) {
            total = Some(total.unwrap_or(0) + v);
        }
    }
    total
}

fn snmp_value(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let header = lines.next()?;
    let values = lines.next()?;
    let i = header.split_whitespace().position(|h| h == name)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_drops_column() {
        let t = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  123: 0100007F:A2B1 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 987654 2 0000000000000000 42\n";
        assert_eq!(drops_in(t, 987654), Some(42));
        assert_eq!(drops_in(t, 1), None);
    }

    #[test]
    fn parses_snmp() {
        let t = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 2 7 11 5\n";
        assert_eq!(snmp_value(t, "Udp:", "InErrors"), Some(7));
        assert_eq!(snmp_value(t, "Udp:", "RcvbufErrors"), Some(5));
        assert_eq!(snmp_value(t, "Udp:", "Nope"), None);
    }

    #[test]
    fn a_real_socket_has_zero_drops() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let ino = socket_inode(&s).unwrap();
        assert_eq!(udp_socket_drops(ino), Some(0));
        assert_eq!(udp_sockets_drops(&[Some(ino), None]), [Some(0), None]);
        assert!(host_udp_counter("InErrors").is_some());
    }
}
