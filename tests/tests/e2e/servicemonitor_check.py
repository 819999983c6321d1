# The ServiceMonitor, which kubernetes-validate has no schema for, checked
# against the Service, the DaemonSet and the NetworkPolicy it must agree
# with (tests/tests/e2e/fleet.rs runs this from the repository root).
import yaml
def docs(p):
    return [d for d in yaml.safe_load_all(open(p)) if d]
def one(p, kind):
    [d] = [d for d in docs(p) if d['kind'] == kind]
    return d
ds = one('dist/k8s/netserver-daemonset.yaml', 'DaemonSet')
np = one('dist/k8s/networkpolicy.yaml', 'NetworkPolicy')
svc = one('dist/k8s/prometheus-operator/service.yaml', 'Service')
sm = one('dist/k8s/prometheus-operator/servicemonitor.yaml', 'ServiceMonitor')
assert sm['apiVersion'] == 'monitoring.coreos.com/v1', sm['apiVersion']
ns = ds['metadata']['namespace']
assert sm['metadata']['namespace'] == svc['metadata']['namespace'] == ns
# the fields used, spelled as the CRD spells them (nothing else checks them)
assert set(sm) <= {'apiVersion', 'kind', 'metadata', 'spec'}, sorted(sm)
assert set(sm['spec']) <= {'selector', 'endpoints', 'namespaceSelector', 'jobLabel'}, sorted(sm['spec'])
assert set(sm['spec']['selector']) == {'matchLabels'}, sm['spec']['selector']
assert ns in sm['spec'].get('namespaceSelector', {}).get('matchNames', [ns])
sub = lambda a, b: a.items() <= (b or {}).items()
# ServiceMonitor -> Service -> DaemonSet pods
assert sub(sm['spec']['selector']['matchLabels'], svc['metadata'].get('labels')), 'selector/Service labels'
assert svc['spec'].get('clusterIP') == 'None', 'headless'
pod = ds['spec']['template']
assert sub(svc['spec']['selector'], pod['metadata']['labels']), 'Service selector/pod labels'
[c] = [c for c in pod['spec']['containers'] if c['name'] == 'netserver']
cports = {p['name']: p for p in c['ports']}
sports = {p['name']: p for p in svc['spec']['ports']}
assert sm['spec']['endpoints'], 'no endpoints'
for e in sm['spec']['endpoints']:
    assert set(e) <= {'port', 'path', 'scheme', 'interval', 'scrapeTimeout', 'relabelings', 'metricRelabelings', 'honorLabels'}, sorted(e)
    for r in e.get('relabelings', []) + e.get('metricRelabelings', []):
        assert set(r) <= {'sourceLabels', 'targetLabel', 'action', 'regex', 'replacement', 'separator'}, sorted(r)
    assert e.get('path', '/metrics') == '/metrics' and e.get('scheme', 'http') == 'http', e
    sp = sports[e['port']]
    cp = cports[sp['targetPort']] if isinstance(sp['targetPort'], str) else next(p for p in c['ports'] if p['containerPort'] == sp['targetPort'])
    assert cp['name'] == 'metrics' and sp.get('protocol', 'TCP') == cp.get('protocol', 'TCP') == 'TCP', (sp, cp)
port = cp['containerPort']
# netserver serves there, the annotations say so, the NetworkPolicy opens it
a = c['args']
assert a[a.index('--metrics') + 1].rsplit(':', 1)[1] == str(port), a
ann = pod['metadata']['annotations']
assert (ann['prometheus.io/scrape'], ann['prometheus.io/port'], ann['prometheus.io/path']) == ('true', str(port), '/metrics'), ann
assert any(p.get('protocol', 'TCP') == 'TCP' and p['port'] in (port, 'metrics') for r in np['spec']['ingress'] for p in r.get('ports', [])), 'NetworkPolicy'
print('servicemonitor ok: %s/%s -> service/%s:%s -> daemonset/%s port %s %d' % (ns, sm['metadata']['name'], svc['metadata']['name'], e['port'], ds['metadata']['name'], cp['name'], port))
