complete -c netserver -s L -d 'Listen on this address only, and/or for this family (4, 6)' -r
complete -c netserver -s p -d 'Listen for control connections on this port (default 12865)' -r
complete -c netserver -s v -d 'Log verbosity: 0 errors, 1 one line per test (default), 2 more' -r
complete -c netserver -s n -d 'Number of CPUs to assume for CPU utilisation' -r
complete -c netserver -l data-ports -d 'Data sockets use ports in this range; clients may ask for one of them' -r
complete -c netserver -l max-sessions -d 'Most control sessions at once (default 256)' -r
complete -c netserver -l max-per-client -d 'Most sessions from one client address (default 128)' -r
complete -c netserver -l max-pending -d 'Most connections waiting for their first bytes (default 4096; when full, the oldest of the address holding the most is closed)' -r
complete -c netserver -l max-test-length -d 'Longest test a client may run (default 86400, a day)' -r
complete -c netserver -l max-flows -d 'Most flows (data connections) in one test (default 16384)' -r
complete -c netserver -l max-test-fds -d 'Most file descriptors one test may hold (default a quarter of what the open-files limit leaves for tests; an address\'s tests together twice that)' -r
complete -c netserver -l max-tests-per-client -d 'Most tests one client address may run at once (default 64)' -r
complete -c netserver -l schedule -d 'shared (default): tests run at once; exclusive: one client host\'s tests at a time (its tests join its turn, which ends a second after its last), other hosts waiting their turn in order (every dialect: ours, netperf 2.7\'s, iperf3\'s)' -r
complete -c netserver -l max-wait -d 'With --schedule exclusive, the longest a test waits its turn before it is refused (default 60)' -r
complete -c netserver -l memory-cap -d 'Most buffer memory one session may use (default 64M)' -r
complete -c netserver -l memory-budget -d 'Most buffer memory all running tests together may use (default a quarter of the host\'s memory, at most 64G)' -r
complete -c netserver -l socket-budget -d 'Most kernel socket memory (send and receive queues) all running tests together may hold; a test a quarter (default half of net.ipv4.tcp_mem)' -r
complete -c netserver -l log-file -d 'Append log lines to this file (default: stderr, or nothing when detached)' -r
complete -c netserver -l max-file-size -d 'Most bytes --log-file and --record each hold; further lines are dropped and counted until SIGHUP opens a new file (default 1G)' -r
complete -c netserver -l log-format -d 'Log lines as text (default) or as one JSON object each' -r
complete -c netserver -l pid-file -d 'Write the daemon\'s process id to this file (after detaching; removed at exit)' -r
complete -c netserver -l record -d 'Append a JSON line to this file after each completed test, with both ends\' figures' -r
complete -c netserver -l policy -d 'Budgets per client address, per prefix and for the daemon, and what one test may ask (TOML; read again on SIGHUP; see doc/service.md)' -r
complete -c netserver -l iperf3 -d 'Also serve iperf3 3.x clients on this port (iperf3\'s own is 5201), many at once; with no address, on -L\'s address or every address' -r
complete -c netserver -l stamp -d 'Also reflect STAMP test packets (RFC 8762/8972) on this UDP port; with no port (--stamp alone, or an address alone), on STAMP\'s own, 862; with no address, on -L\'s address or every address' -r
complete -c netserver -l stamp-key -d '--stamp in authenticated mode: HMAC-SHA-256 under the key in this file (its bytes, a trailing newline left out); a packet whose HMAC does not verify gets no reflection' -r
complete -c netserver -l stamp-rate -d '--stamp reflects at most n packets a second to one address (default 100000); the rest are dropped and counted' -r
complete -c netserver -l metrics -d 'Serve OpenMetrics text at http://addr:port/metrics (off by default; unauthenticated)' -r
complete -c netserver -l handshake-timeout -d 'Hello and authentication must be done within this (default 10; first bytes within half of it)' -r
complete -c netserver -l idle-timeout -d 'Longest silence of a control connection between tests (default 60)' -r
complete -c netserver -l data-timeout -d 'Data connections must arrive within this of the setup reply (default 10)' -r
complete -c netserver -l key-file -d 'Require clients to prove they know the key in this file (mode 600)' -r
complete -c netserver -s Z -d 'Require clients to prove they know this passphrase (never sent by ours; netperf 2.7 clients send it in the clear)' -r
complete -c netserver -l rsa-private-key-path -d 'iperf3 clients must authenticate as iperf3 -s requires: the RSA private key (PEM, unencrypted) their tokens are decrypted with; with --authorized-users-path' -r
complete -c netserver -l authorized-users-path -d 'The iperf3 users file (lines user,sha256 of {user}password, as iperf3\'s); read again at each test' -r
complete -c netserver -l time-skew-threshold -d 'How far an iperf3 client\'s clock may be from ours when it authenticates (default 10)' -r
complete -c netserver -s h -l help -d 'Display this text'
complete -c netserver -s D -d 'Do not daemonize: stay in the foreground, log to stderr'
complete -c netserver -s d -d 'Increase debugging output (raises the verbosity)'
complete -c netserver -s f -d 'Accepted for netperf compatibility (sessions are threads)'
complete -c netserver -s N -d 'Accepted for netperf compatibility'
complete -c netserver -s 4 -d 'IPv4 only'
complete -c netserver -s 6 -d 'IPv6 only'
complete -c netserver -s V -d 'Display netperf 2.7\'s version line, and exit'
complete -c netserver -l version -d 'Display this netserver\'s version and its control protocol\'s, and exit'
complete -c netserver -l stamp-stateless -d '--stamp numbers its reflections as the sender did (stateless); by default it counts each session\'s own (stateful: the sender tells loss each way)'
complete -c netserver -l install-service -d 'Windows: register netserver as a service that starts at boot with the other options given'
complete -c netserver -l uninstall-service -d 'Windows: remove the service (stopped first)'
complete -c netserver -l service -d 'Windows: run under the service manager (as --install-service registers it)'
complete -c netserver -l allow-netperf2 -d 'With --key-file, serve netperf 2.7 clients too, which cannot prove the key'
complete -c netserver -l allow-iperf3-unauthenticated -d 'With --key-file, serve iperf3 clients without credentials too (they cannot prove the key)'
complete -c netserver -l fleet -d 'Run third-party tests (netperf mesh) for clients that prove the key: needs --key-file'
complete -c netserver -l no-netperf2 -d 'Do not serve netperf 2.7 clients (they are told so)'
