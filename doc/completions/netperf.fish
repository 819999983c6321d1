complete -c netperf -s a -d 'Local send,recv buffer alignment (accepted; no effect)' -r
complete -c netperf -s A -d 'Remote send,recv buffer alignment (accepted; no effect)' -r
complete -c netperf -s b -d 'Packets per interval (needs netperf\'s --enable-intervals; no effect)' -r
complete -c netperf -s B -d 'Emit this string at the end of brief (-P 0) output' -r
complete -c netperf -s c -d 'Report local CPU usage (an optional rate argument is accepted)' -r
complete -c netperf -s C -d 'Report remote CPU usage (an optional rate argument is accepted)' -r
complete -c netperf -s D -d 'Display interim results every secs seconds (negative: precise timing)' -r
complete -c netperf -s f -d 'Output units: bytes (powers of 1024) or bits (powers of 1000)' -r
complete -c netperf -s F -d 'Fill send buffers with data from this file' -r
complete -c netperf -s H -d 'The netserver\'s host, and optionally its address family (4 or 6)' -r
complete -c netperf -s i -d 'Most and fewest iterations for a confidence interval (3 to 30)' -r
complete -c netperf -s I -d 'Confidence level (50 to 99.9) and interval width in percent' -r
complete -c netperf -s k -d 'Dirty-buffer counts (accepted; no effect)' -r
complete -c netperf -s K -d 'Dirty-buffer counts (accepted; no effect)' -r
complete -c netperf -s l -d 'Test length: seconds (>0), or bytes/transactions/datagrams (<0)' -r
complete -c netperf -s L -d 'Local address and family of the control connection' -r
complete -c netperf -s n -d 'Number of CPUs for CPU utilisation' -r
complete -c netperf -s o -d 'Local buffer offsets (accepted; no effect)' -r
complete -c netperf -s O -d 'Remote buffer offsets (accepted; no effect)' -r
complete -c netperf -s p -d 'netserver\'s control port (12865), and our local control port' -r
complete -c netperf -s P -d 'Don\'t/do display test headers' -r
complete -c netperf -s s -d 'Wait this long between test setup and test start' -r
complete -c netperf -s T -d 'Bind netperf and netserver to these CPUs' -r
complete -c netperf -s v -d 'Verbosity: 0 result only, 1 table (default), 2 more detail' -r
complete -c netperf -s W -d 'Number of send,recv buffers in the ring' -r
complete -c netperf -s w -d 'Interval between bursts (needs netperf\'s --enable-intervals; no effect)' -r
complete -c netperf -s y -d 'SO_PRIORITY of the data sockets' -r
complete -c netperf -s Y -d 'IP TOS (DSCP<<2) of the data sockets, in hex or decimal' -r
complete -c netperf -s Z -d 'Prove to netserver that we know this passphrase (never sent)' -r
complete -c netperf -l token -d 'Run with a token `netserver token` printed (proved, never sent; netperf 2.7 takes it as -Z)' -r
complete -c netperf -l plot -d 'Draw the run into an SVG file: throughput over time, iterations, latency percentiles' -r
complete -c netperf -l dialect -d 'Control protocol: this suite\'s, netperf 2.7\'s (for its netserver), iperf3\'s (as --iperf3), or found out (default)' -r
complete -c netperf -l key-file -d 'Authenticate to netserver with the key in this file' -r
complete -c netperf -s t -d 'Test to run: TCP_STREAM (default), TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR' -r -f -a "TCP_STREAM\t''
TCP_MAERTS\t''
UDP_STREAM\t''
TCP_RR\t''
UDP_RR\t''
TCP_CRR\t''
OMNI\t''
TCP_SENDFILE\t''
TCP_CC\t''
TCP_MSS\t''
LOC_CPU\t''
REM_CPU\t''
UUID\t''
RPM\t''
STAMP\t''"
complete -c netperf -s d -d 'Increase debugging output'
complete -c netperf -s h -l help -d 'Display this text'
complete -c netperf -s j -d 'Time each send and receive of stream tests too (the _RR tests are always timed)'
complete -c netperf -s N -d 'No control connection (not supported)'
complete -c netperf -s r -d 'Declare confidence on the result alone, ignoring CPU'
complete -c netperf -s S -d 'Set SO_KEEPALIVE on the data connections'
complete -c netperf -s V -d 'Display netperf 2.7\'s version line, and exit'
complete -c netperf -l version -d 'Display this netperf\'s version and its control protocol\'s, and exit'
complete -c netperf -s 4 -d 'Use IPv4 for control and data'
complete -c netperf -s 6 -d 'Use IPv6 for control and data'
complete -c netperf -l json -d 'Print one JSON document with every option, result, interim sample and iteration'
complete -c netperf -l json-stream -d 'Print one JSON object a line as the run goes (start, interim, iteration, end with the --json document)'
complete -c netperf -l iperf3 -d 'Run the test against an iperf3 server (iperf3 -s; port 5201 unless -p says): TCP_STREAM, TCP_MAERTS (its -R), UDP_STREAM (its -u)'
