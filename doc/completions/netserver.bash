_netserver() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="netserver"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        netserver)
            opts="-h -D -d -f -L -N -p -4 -6 -v -V -n -Z --help --version --data-ports --max-sessions --max-per-client --max-pending --max-test-length --max-flows --max-test-fds --max-tests-per-client --schedule --max-wait --memory-cap --memory-budget --socket-budget --log-file --max-file-size --log-format --pid-file --record --policy --iperf3 --stamp --stamp-key --stamp-stateless --stamp-rate --metrics --handshake-timeout --idle-timeout --data-timeout --key-file --install-service --uninstall-service --service --allow-netperf2 --rsa-private-key-path --authorized-users-path --time-skew-threshold --allow-iperf3-unauthenticated --fleet --no-netperf2"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                -L)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -v)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --data-ports)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sessions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-per-client)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-pending)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-test-length)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-flows)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-test-fds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tests-per-client)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --schedule)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-cap)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --socket-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-file-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --record)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --policy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iperf3)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stamp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stamp-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stamp-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --handshake-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --data-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -Z)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rsa-private-key-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --authorized-users-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --time-skew-threshold)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _netserver -o nosort -o bashdefault -o default netserver
else
    complete -F _netserver -o bashdefault -o default netserver
fi
