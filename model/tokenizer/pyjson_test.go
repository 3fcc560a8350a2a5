package tokenizer

import (
	"strings"
	"testing"
)

// Expected outputs were printed by Python 3.11: json.dumps(json.loads(in), ensure_ascii=False).
func TestPythonJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":[1,2.5,1e20,1e-7,0.1,100.0,-0.0,12345678901234567890],"b":"x\"\\\n\u0001é\u2028","c":{},"d":[],"e":null,"f":true}`,
			"{\"a\": [1, 2.5, 1e+20, 1e-07, 0.1, 100.0, -0.0, 12345678901234567890], \"b\": \"x\\\"\\\\\\n\\u0001é\u2028\", \"c\": {}, \"d\": [], \"e\": null, \"f\": true}"},
		{`1e16`, `1e+16`},
		{`1e15`, `1000000000000000.0`},
		{`1.5e-5`, `1.5e-05`},
		{`0.0001`, `0.0001`},
		{`123.456e2`, `12345.6`},
		{`-0`, `0`},
		{`-0.0`, `-0.0`},
		{`"\u001f\/"`, `"\u001f/"`},
		{`[1E2, 5e-324, 1.7976931348623157e308]`, `[100.0, 5e-324, 1.7976931348623157e+308]`},
		{`{"z":1,"a":{"k":[true,false,null]}}`, `{"z": 1, "a": {"k": [true, false, null]}}`},
	} {
		got, err := PythonJSON(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("PythonJSON(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{`, `1 2`, `1e400`, ``} {
		if _, err := PythonJSON(bad); err == nil {
			t.Errorf("PythonJSON(%q): no error", bad)
		}
	}
}

// TestRenderQwen3ChatTools: the system turn with tools, written by hand from the template.
func TestRenderQwen3ChatTools(t *testing.T) {
	tool := `{"type":"function","function":{"name":"get","parameters":{"city":"string"}}}`
	got, err := RenderQwen3Chat([]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}},
		ChatOptions{AddGenerationPrompt: true, Tools: []string{tool, `{"name":"now"}`}})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get", "parameters": {"city": "string"}}}` + "\n" + `{"name": "now"}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// Without a system message the tools turn stands alone.
	got, _ = RenderQwen3Chat([]Message{{Role: "user", Content: "Hi"}}, ChatOptions{Tools: []string{`{}`}})
	if !strings.HasPrefix(got, "<|im_start|>system\n# Tools\n\n") || !strings.Contains(got, "<tools>\n{}\n</tools>") {
		t.Errorf("tools without system: %q", got)
	}
	if _, err := RenderQwen3Chat([]Message{{Role: "user"}}, ChatOptions{Tools: []string{`{`}}); err == nil {
		t.Errorf("bad tool JSON accepted")
	}
}
