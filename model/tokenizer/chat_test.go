package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The expected strings below are written by hand from the Jinja template in
// testdata/tokenizer_config.json: every turn is "<|im_start|>ROLE\nCONTENT<|im_end|>\n",
// assistant turns after the last user query carry "<think>\nR\n</think>\n\n", earlier
// ones lose it, consecutive tool turns share one user turn, and so on.
func TestRenderQwen3Chat(t *testing.T) {
	reason := "\nfirst I think\n"
	for _, tc := range []struct {
		name string
		msgs []Message
		opt  ChatOptions
		want string
	}{
		{"user only, generation prompt",
			[]Message{{Role: "user", Content: "Hi"}}, ChatOptions{AddGenerationPrompt: true},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"system and user, thinking disabled",
			[]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}},
			ChatOptions{AddGenerationPrompt: true, DisableThinking: true},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"no generation prompt",
			[]Message{{Role: "user", Content: "Hi"}}, ChatOptions{},
			"<|im_start|>user\nHi<|im_end|>\n"},
		{"history drops earlier thinking",
			[]Message{
				{Role: "user", Content: "Q1"},
				{Role: "assistant", Content: "<think>\nhmm\n</think>\n\nA1"},
				{Role: "user", Content: "Q2"},
			}, ChatOptions{AddGenerationPrompt: true},
			"<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n"},
		{"last assistant after the query keeps thinking",
			[]Message{
				{Role: "user", Content: "Q"},
				{Role: "assistant", Content: "<think>\nhmm\n</think>\n\nA"},
			}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nA<|im_end|>\n"},
		{"last assistant without thinking gets an empty block",
			[]Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"},
		{"reasoning_content field is stripped of newlines",
			[]Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "\nA", ReasoningContent: &reason}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nfirst I think\n</think>\n\nA<|im_end|>\n"},
		{"strip('\\n') keeps spaces",
			[]Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "<think> r \n</think> \nA"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n r \n</think>\n\n \nA<|im_end|>\n"},
		{"system not first is an ordinary turn",
			[]Message{{Role: "user", Content: "Q"}, {Role: "system", Content: "S"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>system\nS<|im_end|>\n"},
		{"tool calls and grouped tool responses",
			[]Message{
				{Role: "user", Content: "Weather?"},
				{Role: "assistant", Content: "", ToolCalls: []ToolCall{{"get", `{"city": "Oslo"}`}, {"get", `{"city": "Rome"}`}}},
				{Role: "tool", Content: "5C"},
				{Role: "tool", Content: "20C"},
				{Role: "assistant", Content: "Oslo 5C, Rome 20C."},
			}, ChatOptions{},
			"<|im_start|>user\nWeather?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>" +
				"\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n5C\n</tool_response>\n<tool_response>\n20C\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\nOslo 5C, Rome 20C.<|im_end|>\n"},
		{"a wrapped tool response does not count as the last query",
			[]Message{
				{Role: "user", Content: "Q"},
				{Role: "assistant", Content: "<think>r1</think>A1"},
				{Role: "user", Content: "<tool_response>x</tool_response>"},
				{Role: "assistant", Content: "<think>r2</think>A2"},
			}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\nr1\n</think>\n\nA1<|im_end|>\n" +
				"<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderQwen3Chat(tc.msgs, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestRenderQwen3ChatErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []Message
		want string
	}{
		{"empty", nil, "no messages"},
		{"unknown role", []Message{{Role: "bot", Content: "x"}}, `role "bot"`},
		{"tool call on user", []Message{{Role: "user", ToolCalls: []ToolCall{{"f", "{}"}}}}, "only assistant"},
	} {
		_, err := RenderQwen3Chat(tc.msgs, ChatOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestQwen3TemplateKnown ties RenderQwen3Chat to the template it was written from: the
// config's template must be recognised, carry the literals the code emits, and reach the
// tokenizer through the loader.
func TestQwen3TemplateKnown(t *testing.T) {
	raw, err := os.ReadFile(qwen3ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if !KnownQwen3Template(cfg.ChatTemplate) {
		t.Fatalf("the template in %s is not recognised", qwen3ConfigPath)
	}
	if KnownQwen3Template(cfg.ChatTemplate + " ") {
		t.Errorf("a changed template is recognised")
	}
	for _, lit := range []string{`'<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n'`,
		`{{- '<think>\n\n</think>\n\n' }}`, `'<|im_start|>system\n' + messages[0].content + '<|im_end|>\n'`,
		`{{- '<|im_start|>user' }}`, `{{- '\n<tool_response>\n' }}`,
		`"# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"`,
		`"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"`,
		`{{- tool | tojson }}`} {
		if !strings.Contains(cfg.ChatTemplate, lit) {
			t.Errorf("template lacks %s", lit)
		}
	}
	if loadQwen3(t).Data().ChatTemplate != cfg.ChatTemplate {
		t.Errorf("LoadTokenizerJSON did not read the chat template")
	}
	// The rendered prompt's control tokens become single ids when parsed.
	p, _ := RenderQwen3Chat([]Message{{Role: "user", Content: "Hi"}}, ChatOptions{AddGenerationPrompt: true})
	ids := loadQwen3(t).Encode(p, true)
	if ids[0] != 151644 || ids[len(ids)-3] != 151644 {
		t.Errorf("rendered prompt encodes to %v; want <|im_start|> (151644) at 0 and len-3", ids)
	}
}
