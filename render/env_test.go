package render

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"

	"netspec.dev/netspec/plan"
)

func TestEnvFileGolden(t *testing.T) {
	for _, f := range textFixturePlan().Env {
		t.Run(f.Namespace, func(t *testing.T) {
			compareTextGolden(t, "env/"+f.Namespace+".env", EnvFile(f))
		})
	}
}

const envHeader = "# service environment of namespace ns, as the kubelet sets it — written by netspec\n"

func TestEnvFile(t *testing.T) {
	tests := []struct {
		name string
		vars []plan.EnvVar
		want string
	}{
		{name: "no variables", want: envHeader},
		{
			name: "kubelet values are written as they are",
			vars: []plan.EnvVar{
				{Name: "WEB_SERVICE_HOST", Value: "10.96.12.34"},
				{Name: "WEB_PORT", Value: "tcp://10.96.12.34:80"},
				{Name: "WEB_PORT_80_TCP_PROTO", Value: "tcp"},
				{Name: "V6_PORT", Value: "tcp://[fd00:10:96::1]:80"},
				{Name: "WEB_SERVICE_PORT", Value: "80"},
			},
			want: envHeader +
				"V6_PORT=tcp://[fd00:10:96::1]:80\n" +
				"WEB_PORT=tcp://10.96.12.34:80\n" +
				"WEB_PORT_80_TCP_PROTO=tcp\n" +
				"WEB_SERVICE_HOST=10.96.12.34\n" +
				"WEB_SERVICE_PORT=80\n",
		},
		{
			name: "sorted by key, stable",
			vars: []plan.EnvVar{
				{Name: "B", Value: "2"}, {Name: "A", Value: "first"}, {Name: "A_B", Value: "3"}, {Name: "A", Value: "second"},
			},
			want: envHeader + "A=first\nA=second\nA_B=3\nB=2\n",
		},
		{
			name: "empty value",
			vars: []plan.EnvVar{{Name: "E", Value: ""}},
			want: envHeader + "E=\n",
		},
		{
			name: "characters that need no quotes",
			vars: []plan.EnvVar{{Name: "X", Value: "a=b#c$d`e;é"}},
			want: envHeader + "X=a=b#c$d`e;é\n",
		},
		{
			name: "space",
			vars: []plan.EnvVar{{Name: "X", Value: "a b"}},
			want: envHeader + "X=\"a b\"\n",
		},
		{
			name: "newline, tab and carriage return",
			vars: []plan.EnvVar{{Name: "X", Value: "a\nb\tc\r"}},
			want: envHeader + `X="a\nb\tc\r"` + "\n",
		},
		{
			name: "double quote",
			vars: []plan.EnvVar{{Name: "X", Value: `"q"`}},
			want: envHeader + `X="\"q\""` + "\n",
		},
		{
			name: "single quote",
			vars: []plan.EnvVar{{Name: "X", Value: `it's`}},
			want: envHeader + `X="it's"` + "\n",
		},
		{
			name: "backslash",
			vars: []plan.EnvVar{{Name: "X", Value: `C:\x`}},
			want: envHeader + `X="C:\\x"` + "\n",
		},
		{
			name: "control character and invalid UTF-8",
			vars: []plan.EnvVar{{Name: "X", Value: "\x00\x7f"}, {Name: "Y", Value: "\xff"}},
			want: envHeader + `X="\x00\x7f"` + "\n" + `Y="\xff"` + "\n",
		},
		{
			name: "non-breaking space",
			vars: []plan.EnvVar{{Name: "X", Value: "a\u00a0b"}},
			want: envHeader + `X="a\u00a0b"` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := plan.EnvFile{Namespace: "ns", Vars: tt.vars}
			before := append([]plan.EnvVar(nil), tt.vars...)
			got := string(EnvFile(in))
			if got != tt.want {
				t.Errorf("EnvFile:\n%s\nwant:\n%s", got, tt.want)
			}
			for i := range before {
				if in.Vars[i] != before[i] {
					t.Fatalf("EnvFile reordered its input")
				}
			}
			// Reading the file back as documented gives the values.
			back := readEnvFile(t, []byte(got))
			if len(back) != len(tt.vars) {
				t.Fatalf("read back %d variables, want %d", len(back), len(tt.vars))
			}
			for _, v := range tt.vars {
				found := false
				for _, b := range back {
					found = found || b == v
				}
				if !found {
					t.Errorf("variable %+v not read back from:\n%s", v, got)
				}
			}
		})
	}
}

// readEnvFile reads an env file as EnvFile documents: '#' lines are
// comments, a value starting with '"' is a Go quoted string.
func readEnvFile(t *testing.T, data []byte) []plan.EnvVar {
	t.Helper()
	var vars []plan.EnvVar
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line without '=': %q", line)
		}
		if strings.HasPrefix(v, `"`) {
			u, err := strconv.Unquote(v)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			v = u
		}
		vars = append(vars, plan.EnvVar{Name: k, Value: v})
	}
	return vars
}
