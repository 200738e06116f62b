// Package deploy holds the container image and the Kubernetes manifests of every stage
// (docs/operations.md). Its test renders the kustomize base offline and decodes every
// object strictly into the Kubernetes API types, so a misspelt field fails `make test`.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"rental/infra/deploy/monitoring"
	"rental/infra/stages"
	"rental/schemas/topics"
)

// typed returns an empty value of the API type of kind; the test refuses a kind it does
// not know, so a new object is checked too.
func typed(kind string) (any, bool) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, true
	case "PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "Job":
		return &batchv1.Job{}, true
	case "ConfigMap":
		return &corev1.ConfigMap{}, true
	case "Secret":
		return &corev1.Secret{}, true
	case "Service":
		return &corev1.Service{}, true
	case "ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "ScaledObject":
		return &scaledObject{}, true
	case "PrometheusRule":
		return &prometheusRule{}, true
	case "PodMonitor":
		return &podMonitor{}, true
	}
	return nil, false
}

// scaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject the components use;
// decoding strictly into it refuses any other field, so a misspelt one fails here
// instead of being dropped by the cluster.
type scaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount int `json:"minReplicaCount"`
		MaxReplicaCount int `json:"maxReplicaCount"`
		PollingInterval int `json:"pollingInterval"`
		CooldownPeriod  int `json:"cooldownPeriod"`
		Triggers        []struct {
			Type     string `json:"type"`
			Metadata struct {
				BootstrapServersFromEnv string `json:"bootstrapServersFromEnv"`
				ConsumerGroup           string `json:"consumerGroup"`
				Topic                   string `json:"topic"`
				LagThreshold            string `json:"lagThreshold"`
				AllowIdleConsumers      string `json:"allowIdleConsumers"`
			} `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// prometheusRule is the Prometheus operator's monitoring.coreos.com/v1 PrometheusRule.
type prometheusRule struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   metav1.ObjectMeta   `json:"metadata"`
	Spec       monitoring.RuleFile `json:"spec"`
}

// podMonitor is the part of the operator's PodMonitor the component uses.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// render builds the kustomization in dir of fs and decodes every object strictly.
func render(fs filesys.FileSystem, dir string) (map[string]any, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(fs, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, r := range rm.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		obj, ok := typed(r.GetKind())
		if !ok {
			return nil, fmt.Errorf("%s/%s: kind not checked by this test", r.GetKind(), r.GetName())
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", r.GetKind(), r.GetName(), err)
		}
		out[r.GetKind()+"/"+r.GetName()] = obj
	}
	return out, nil
}

// stageBinaries are the stages a Deployment runs, one per binary of `make build`.
var stageBinaries = []string{"edge", "relay", "chainwatch", "pricer", "marketwatch", "orderflow", "batches", "subscriptions", "crediting", "webhooks", "payments"}

func TestManifestsRenderAndDecodeStrictly(t *testing.T) {
	objs, err := render(filesys.MakeFsOnDisk(), "base")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stageBinaries {
		d, ok := objs["Deployment/"+name].(*appsv1.Deployment)
		if !ok {
			t.Errorf("no Deployment for stage %s", name)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Equal(c.Command, []string{"/usr/local/bin/" + name}) {
			t.Errorf("%s runs %v", name, c.Command)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: probes not wired to /healthz and /readyz", name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no resources", name)
		}
		if _, ok := objs["PodDisruptionBudget/"+name]; !ok {
			t.Errorf("%s: no PodDisruptionBudget", name)
		}
		if !strings.HasPrefix(c.Image, "registry.example.com/rental:") {
			t.Errorf("%s: image %q", name, c.Image)
		}
	}
	if _, ok := objs["Job/rental-migrate"]; !ok {
		t.Error("no migration Job")
	}
	if _, ok := objs["HorizontalPodAutoscaler/edge"]; !ok {
		t.Error("no autoscaler for the edge")
	}
	cm := objs["ConfigMap/rental-config"].(*corev1.ConfigMap)
	for k := range cm.Data {
		if strings.Contains(k, "KEY") || strings.Contains(k, "PASSWORD") {
			t.Errorf("ConfigMap holds a secret: %s", k)
		}
	}
	// Every stage binary of the Makefile's build has a Deployment (or is a tool).
	mains, _ := filepath.Glob("../../*/cmd/*/main.go")
	for _, m := range mains {
		bin := filepath.Base(filepath.Dir(m))
		if slices.Contains([]string{"admin", "migrate", "devstack", "tronsim", "chaos", "devkit", "mcp"}, bin) {
			continue
		}
		if _, ok := objs["Deployment/"+bin]; !ok {
			t.Errorf("binary %s has no Deployment", bin)
		}
	}
}

// secretUse is which Secret each workload reads: what its configuration needs and nothing
// more. Redis and Kafka follow the stages' own readiness table (stages.StageNeeds, checked
// below); the keys follow the stage code: the signer keys only in the order processor
// (SIGNER_KEYS), the private deposit root and the sweep signer only in crediting, where the
// sweeper runs (DEPOSIT_HD_KEY, SWEEP_SIGNER_KEY), the private root also in payments (the
// payment addresses' refunds), the master key in the edge (API key
// secrets) and the webhooks stage (endpoint secrets). The edge derives deposit addresses
// from DEPOSIT_XPUB in the ConfigMap.
var secretUse = map[string][]string{
	"Deployment/edge":          {"rental-db", "rental-redis", "rental-master-key"},
	"Deployment/relay":         {"rental-db", "rental-kafka"},
	"Deployment/chainwatch":    {"rental-db"},
	"Deployment/pricer":        {"rental-db", "rental-redis", "rental-kafka"},
	"Deployment/marketwatch":   {"rental-db", "rental-redis"},
	"Deployment/orderflow":     {"rental-db", "rental-kafka", "rental-orderflow-signers"},
	"Deployment/batches":       {"rental-db", "rental-redis", "rental-kafka"},
	"Deployment/subscriptions": {"rental-db", "rental-redis"},
	"Deployment/crediting":     {"rental-db", "rental-kafka", "rental-sweeper-secrets"},
	"Deployment/webhooks":      {"rental-db", "rental-kafka", "rental-master-key"},
	"Deployment/payments":      {"rental-db", "rental-redis", "rental-payments-secrets"},
	"Job/rental-migrate":       {"rental-db"},
}

// secretsOf lists the Secrets a pod spec references (envFrom, env valueFrom, volumes).
func secretsOf(p corev1.PodSpec) []string {
	var out []string
	for _, c := range append(append([]corev1.Container(nil), p.InitContainers...), p.Containers...) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				out = append(out, e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, v := range p.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Rendering the base shows each Secret referenced only by the workloads that use it: a
// Deployment that mounts a Secret its stage does not read fails, and so does one missing a
// Secret it needs.
func TestEachStageHoldsOnlyItsOwnSecrets(t *testing.T) {
	objs, err := render(filesys.MakeFsOnDisk(), "base")
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range objs {
		var spec corev1.PodSpec
		switch o := obj.(type) {
		case *appsv1.Deployment:
			spec = o.Spec.Template.Spec
		case *batchv1.Job:
			spec = o.Spec.Template.Spec
		default:
			continue
		}
		want, ok := secretUse[name]
		if !ok {
			t.Errorf("%s: no entry in secretUse: say which Secrets it reads", name)
			continue
		}
		want = slices.Sorted(slices.Values(want))
		if got := secretsOf(spec); !slices.Equal(got, want) {
			t.Errorf("%s references Secrets %v, its stage reads %v", name, got, want)
		}
		for _, sec := range want {
			if _, ok := objs["Secret/"+sec]; !ok {
				t.Errorf("%s: Secret %s is not in the base", name, sec)
			}
		}
	}
	for stage, n := range stages.StageNeeds {
		use := secretUse["Deployment/"+stage]
		if slices.Contains(use, "rental-redis") != n.Redis || slices.Contains(use, "rental-kafka") != n.Kafka {
			t.Errorf("%s: Redis/Kafka Secrets %v disagree with its needs %+v", stage, use, n)
		}
	}
	for k, holders := range map[string][]string{"SIGNER_KEYS": {"rental-orderflow-signers"}, "DEPOSIT_HD_KEY": {"rental-sweeper-secrets", "rental-payments-secrets"},
		"SWEEP_SIGNER_KEY": {"rental-sweeper-secrets"}, "API_KEY_MASTER_KEY": {"rental-master-key"}} {
		for name, obj := range objs {
			sec, ok := obj.(*corev1.Secret)
			if !ok {
				continue
			}
			if _, has := sec.StringData[k]; has != slices.Contains(holders, strings.TrimPrefix(name, "Secret/")) {
				t.Errorf("%s in %s, want it only in %v", k, name, holders)
			}
		}
	}
	if _, ok := objs["Secret/rental-secrets"]; ok {
		t.Error("the shared Secret rental-secrets is back")
	}
	if cm := objs["ConfigMap/rental-config"].(*corev1.ConfigMap); !strings.HasPrefix(cm.Data["DEPOSIT_XPUB"], "xpub") {
		t.Errorf("DEPOSIT_XPUB in the ConfigMap is %q, want an extended public key", cm.Data["DEPOSIT_XPUB"])
	}
}

// A misspelt field anywhere in an object fails the render: the check above cannot pass
// vacuously.
func TestMisspeltFieldFails(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	entries, err := os.ReadDir("base")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("base", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "relay.yaml" {
			b = bytes.Replace(b, []byte("readinessProbe:"), []byte("readynessProbe:"), 1)
		}
		if err := fs.WriteFile(filepath.Join("/base", e.Name()), b); err != nil {
			t.Fatal(err)
		}
	}
	_, err = render(fs, "/base")
	if err == nil || !strings.Contains(err.Error(), "readynessProbe") {
		t.Fatalf("misspelt field not refused: %v", err)
	}
}

// consumerGroups are the consumer groups of each consumer stage and the topics each reads
// (processors/orderflow run.go, consumers/crediting, consumers/webhookdelivery,
// processors/batchflow).
var consumerGroups = map[string]map[string][]topics.Topic{
	"orderflow": {"orderflow.intents": {topics.OrderIntents}, "orderflow.chain": {topics.ChainFacts}},
	"crediting": {"crediting": {topics.ChainFacts}},
	"webhooks":  {"webhooks": {topics.OrderEvents, topics.AccountEvents, topics.SubscriptionEvents, topics.BatchEvents}},
	"batches":   {"batchflow.orders": {topics.OrderEvents}},
}

// The base with every optional component (infra/deploy/all) renders and decodes strictly:
// each consumer stage scales on the lag of each of its groups' topics, never beyond the
// partitions of the largest, with KEDA owning its replicas; the edge keeps its CPU
// autoscaler; the dashboards and rules are there for Grafana and Prometheus.
func TestOptionalComponentsRenderAndDecodeStrictly(t *testing.T) {
	objs, err := render(filesys.MakeFsOnDisk(), "all")
	if err != nil {
		t.Fatal(err)
	}
	partitions := map[string]int{}
	for _, tp := range topics.All() {
		partitions[tp.Name] = int(tp.Partitions)
	}
	for stage, groups := range consumerGroups {
		so, ok := objs["ScaledObject/"+stage].(*scaledObject)
		if !ok {
			t.Errorf("no ScaledObject for %s", stage)
			continue
		}
		d := objs["Deployment/"+stage].(*appsv1.Deployment)
		if so.APIVersion != "keda.sh/v1alpha1" || so.Spec.ScaleTargetRef.Name != d.Name || d.Spec.Replicas != nil {
			t.Errorf("%s: ScaledObject %s targets %q; Deployment replicas %v (want none: KEDA owns them)",
				stage, so.APIVersion, so.Spec.ScaleTargetRef.Name, d.Spec.Replicas)
		}
		want, most := map[string]bool{}, 0
		for g, tps := range groups {
			for _, tp := range tps {
				want[g+" "+tp.Name] = true
				most = max(most, int(tp.Partitions))
			}
		}
		got := map[string]bool{}
		for _, tr := range so.Spec.Triggers {
			m := tr.Metadata
			if tr.Type != "kafka" || m.BootstrapServersFromEnv != "KAFKA_BROKERS" || m.LagThreshold == "" || m.AllowIdleConsumers != "false" {
				t.Errorf("%s: trigger %+v", stage, tr)
			}
			if partitions[m.Topic] == 0 {
				t.Errorf("%s: trigger on unknown topic %q", stage, m.Topic)
			}
			got[m.ConsumerGroup+" "+m.Topic] = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s scales on %v, want the lag of %v", stage, got, want)
		}
		if so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount != most {
			t.Errorf("%s: replicas %d to %d, want at least 1 and at most %d (its topics' partitions)",
				stage, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount, most)
		}
	}
	if _, ok := objs["ScaledObject/edge"]; ok {
		t.Error("the edge scales on CPU, not on a ScaledObject")
	}
	if h, ok := objs["HorizontalPodAutoscaler/edge"].(*autoscalingv2.HorizontalPodAutoscaler); !ok || h.Spec.ScaleTargetRef.Name != "edge" {
		t.Error("the edge lost its CPU autoscaler")
	}
	if d := objs["Deployment/edge"].(*appsv1.Deployment); d.Spec.Replicas == nil {
		t.Error("the component dropped the replicas of the edge")
	}

	rules, err := monitoring.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := objs["PrometheusRule/rental"].(*prometheusRule); !ok || !reflect.DeepEqual(pr.Spec, rules) {
		t.Error("no PrometheusRule with the groups of monitoring/rules.yaml")
	}
	if pm, ok := objs["PodMonitor/rental"].(*podMonitor); !ok || len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port != "ops" {
		t.Error("no PodMonitor scraping the ops port")
	}
	dash, ok := objs["ConfigMap/rental-dashboards"].(*corev1.ConfigMap)
	if !ok || dash.Labels["grafana_dashboard"] != "1" {
		t.Fatal("no dashboards ConfigMap labelled for Grafana's sidecar")
	}
	ds, err := monitoring.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for name := range ds {
		if dash.Data[name] == "" {
			t.Errorf("dashboard %s is not in the ConfigMap", name)
		}
	}
	if cm, ok := objs["ConfigMap/rental-alert-rules"].(*corev1.ConfigMap); !ok || cm.Data["rental.rules.yaml"] == "" {
		t.Error("no ConfigMap with the rules file")
	}
}

// A misspelt field of KEDA's objects fails the render of the overlay too: they are decoded
// as strictly as the Kubernetes types.
func TestMisspeltScalerFieldFails(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if path == filepath.Join("keda", "scaledobjects.yaml") {
			b = bytes.Replace(b, []byte("lagThreshold:"), []byte("lagTreshold:"), 1)
		}
		return fs.WriteFile(filepath.Join("/", path), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = render(fs, "/all")
	if err == nil || !strings.Contains(err.Error(), "lagTreshold") {
		t.Fatalf("misspelt ScaledObject field not refused: %v", err)
	}
}
