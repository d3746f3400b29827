// Package kube proves digestpin's promise where it matters, in the
// rollouts of a real Kubernetes control plane: etcd, kube-apiserver and
// kube-controller-manager (the deployment, replicaset, statefulset,
// daemonset, job, cronjob and serviceaccount controllers; no scheduler and
// no kubelet, so pods stay Pending), started on loopback with locally generated
// certificates and a static token. The tests apply what digestpin renders
// in each of the ways the README documents and count, through the API, the
// ReplicaSets and ControllerRevisions the controllers create: none when
// nothing moved, exactly one for each workload whose image moved, while a
// control without digestpin never rolls. Kubernetes' own decoder and
// admission are also the reference for what a manifest means: every golden
// output of the renderer (the hostile documents it renders included) and
// every test chart is accepted by a server-side dry run and decodes to the
// images digestpin reported, and every document digestpin refuses as
// ambiguous is put to the API server and to a YAML 1.2 reading, to show
// that the two could disagree on it. The job controller makes the Pods of
// Jobs, of Jobs from CronJobs and of Helm's hook Jobs, which the tests
// read; no kubelet runs them, so no Job completes.
//
// The tests print their figures at the end of the log. In the last
// recorded run the dry run accepted 50 documents with 53 images; of the 37
// documents digestpin refuses as ambiguous, the API server refused 4, its
// strict field validation 26 (a repeated key), 6 it read otherwise than
// YAML 1.2 (a !!binary or custom-tagged key or kind, or an alias of one,
// lone CR line breaks), and 1 it read as YAML 1.2 does (a merge key that
// adds a pod spec to a mapping of them), which digestpin refuses
// nonetheless. A key that is an alias of image is read as image.
//
// It is a module of its own (as e2e/cmpserver is). `make test-kube` builds
// kube-apiserver, kube-controller-manager, kubectl and etcd from the module
// in tools/ (pinned versions, Kubernetes' version ldflags) into a cache
// folder outside the clone, named by version, and points the tests at it
// through DIGESTPIN_TEST_KUBE, at digestpin through DIGESTPIN_TEST_BIN and
// at the Helm CLIs through DIGESTPIN_TEST_HELM3 and DIGESTPIN_TEST_HELM4.
// Building them (into ${XDG_CACHE_HOME:-~/.cache}/digestpin-test/kube-v1.37.2/)
// takes about 15 minutes of CPU with a cold Go build cache (34 minutes of
// wall time on two busy cores), 27 s warm, nothing once the folder exists.
// The control plane starts in 3 to 20 s; the tests take 90 s to 6 minutes
// (-race, two shared cores).
package kube
