package render

import (
	"encoding/json"
	"testing"
)

func TestIndentJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "flat object", in: `{"a":1,"b":"x"}`, want: "{\"a\": 1, \"b\": \"x\"}\n"},
		{name: "list of plain values", in: `{"l":[1,2],"m":[]}`, want: "{\"l\": [1, 2], \"m\": []}\n"},
		{name: "nested objects", in: `{"s":[{"a":1},{"a":2}]}`, want: "{\n  \"s\": [\n    {\"a\": 1},\n    {\"a\": 2}\n  ]\n}\n"},
		{name: "brackets and escapes in strings", in: `{"s":[{"a":"[{\"}]"}]}`, want: "{\n  \"s\": [\n    {\"a\": \"[{\\\"}]\"}\n  ]\n}\n"},
		{name: "empty object", in: `{}`, want: "{}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(indentJSON([]byte(tc.in)))
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			var a, b any
			if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(got), &b); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
		})
	}
}
