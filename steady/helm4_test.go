package steady

import (
	"strings"
	"testing"
)

// helm4Doc is a document as Helm 4 hands it to its post-renderer: no
// "# Source:" comment, the file in FileAnnotation.
func helm4Doc(file, body string) string {
	return strings.Replace(body, "metadata:\n", "metadata:\n  annotations:\n    "+FileAnnotation+": '"+file+"'\n", 1)
}

// templateDoc is a document as helm template prints it.
func templateDoc(file, body string) string { return "# Source: " + file + "\n" + body }

func TestHelm4PostRendererStreams(t *testing.T) {
	secret := func(crt string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ndata:\n  tls.crt: " + crt + "\n"
	}
	hook := func(caBundle string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: w\nwebhooks:\n- name: w.example\n  clientConfig:\n    caBundle: " + caBundle + "\n"
	}
	deploy := func(sum, image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata:\n      annotations:\n        checksum/config: " + sum + "\n    spec:\n      containers:\n      - name: app\n        image: " + image + "\n"
	}
	// The webhook file holds the webhook configuration first: Helm 4
	// hands it over in the file's order, helm template prints the Secret
	// first (by kind), and the deployment file sorts first.
	helm4 := func(n, image string) string {
		return "---\n" + helm4Doc("c/templates/deployment.yaml", deploy("sum"+n, image)) +
			"---\n" + helm4Doc("c/templates/webhook.yaml", hook("ca"+n)) +
			"---\n" + helm4Doc("c/templates/webhook.yaml", secret("crt"+n))
	}
	template := func(n, image string) string {
		return "---\n" + templateDoc("c/templates/webhook.yaml", secret("crt"+n)) +
			"---\n" + templateDoc("c/templates/deployment.yaml", deploy("sum"+n, image)) +
			"---\n" + templateDoc("c/templates/webhook.yaml", hook("ca"+n))
	}

	v, err := Diff([]byte(helm4("1", "app:1")), []byte(template("2", "app:1")), Options{})
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	want := []string{
		`Deployment/d (c/templates/deployment.yaml): pod template annotation checksum/config differs between two renders of the same input: this workload restarts on every render`,
		`MutatingWebhookConfiguration/w (c/templates/webhook.yaml): webhooks[name=w.example].clientConfig.caBundle differs between two renders of the same input`,
		`Secret/tls (c/templates/webhook.yaml): data["tls.crt"] differs between two renders of the same input`,
	}
	if got := v.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Warnings() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// What Helm 4 printed last time: helm template's shape, without the
	// annotation.
	previous := template("0", "app:1")
	for _, tc := range []struct {
		desc       string
		output     string
		wantKept   bool
		wantReason string
	}{
		{desc: "only volatile fields changed", output: helm4("1", "app:1"), wantKept: true},
		{desc: "an image moved", output: helm4("1", "app:2"), wantReason: "image field spec.template.spec.containers[name=app].image changed"},
		{
			desc:       "a document is gone",
			output:     "---\n" + helm4Doc("c/templates/deployment.yaml", deploy("sum1", "app:1")) + "---\n" + helm4Doc("c/templates/webhook.yaml", secret("crt1")),
			wantReason: "of the previous output is gone",
		},
		{
			desc:       "another annotation is a real change",
			output:     strings.Replace(helm4("1", "app:1"), "  annotations:\n", "  annotations:\n    team: a\n", 1),
			wantReason: "Deployment/d: metadata.annotations changed",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := Keep([]byte(previous), []byte(tc.output), v, Options{})
			if err != nil {
				t.Fatalf("Keep: %v", err)
			}
			if d.Kept != tc.wantKept || !strings.Contains(d.Reason, tc.wantReason) {
				t.Fatalf("Keep: kept %v (%s), want kept %v (%q)", d.Kept, d.Reason, tc.wantKept, tc.wantReason)
			}
			if !d.Kept {
				if string(d.Output) != tc.output {
					t.Errorf("Keep wrote\n%s\nwant the new output whole", d.Output)
				}
				return
			}
			// The previous documents, in the new output's order, each
			// with the annotation of its match and no Source comment.
			wantOut := "---\n" + helm4Doc("c/templates/deployment.yaml", deploy("sum0", "app:1")) +
				"---\n" + helm4Doc("c/templates/webhook.yaml", hook("ca0")) +
				"---\n" + helm4Doc("c/templates/webhook.yaml", secret("crt0"))
			again, err := Keep([]byte(wantOut), d.Output, nil, Options{})
			if err != nil || !again.Kept {
				t.Errorf("Keep wrote\n%s\nwhich is not the previous output field for field: %v %s", d.Output, err, again.Reason)
			}
			if strings.Contains(string(d.Output), "# Source:") {
				t.Errorf("Keep wrote # Source: comments, which Helm 4 prints itself:\n%s", d.Output)
			}
			if s, err := parse(d.Output, "kept"); err != nil || len(s.docs) != 3 || s.docs[0].file != "c/templates/deployment.yaml" || s.docs[1].file != "c/templates/webhook.yaml" || s.docs[2].file != "c/templates/webhook.yaml" {
				t.Errorf("Keep wrote\n%s\nwant each document with the annotation of its match, in the output's order", d.Output)
			}
		})
	}
}

// TestFileAnnotationOnlyInMetadata: the annotation counts only where Helm
// 4 puts it, as a string in metadata.annotations; elsewhere it is data.
func TestFileAnnotationOnlyInMetadata(t *testing.T) {
	for _, tc := range []struct {
		desc, doc, wantSource string
	}{
		{desc: "metadata annotation", doc: "kind: A\nmetadata:\n  annotations:\n    " + FileAnnotation + ": x.yaml\n", wantSource: "x.yaml"},
		{desc: "in data", doc: "kind: ConfigMap\nmetadata: {name: a}\ndata:\n  " + FileAnnotation + ": x.yaml\n"},
		{desc: "not a string", doc: "kind: A\nmetadata:\n  annotations:\n    " + FileAnnotation + ": [x]\n"},
		{desc: "a Source comment first", doc: "# Source: s.yaml\nkind: A\nmetadata:\n  annotations:\n    " + FileAnnotation + ": x.yaml\n", wantSource: "s.yaml"},
		{desc: "control characters", doc: "kind: A\nmetadata:\n  annotations:\n    " + FileAnnotation + ": \"x\\e.yaml\"\n", wantSource: "x?.yaml"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := parse([]byte(tc.doc), "the input")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.docs[0].source; got != tc.wantSource {
				t.Errorf("source = %q, want %q", got, tc.wantSource)
			}
		})
	}
	if _, err := parse([]byte("kind: A\nmetadata: {annotations: {"+FileAnnotation+": x.yaml}\n"), "the input"); err == nil || !strings.Contains(err.Error(), "the input: document 1") {
		t.Errorf("parse of a document that is not YAML = %v, want an error naming it", err)
	}
}
