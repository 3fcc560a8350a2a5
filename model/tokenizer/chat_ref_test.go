package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
)

// TestRenderQwen3ChatAgainstJinja renders 600 random conversations (system, user,
// assistant and tool turns; think blocks, reasoning_content, tool calls, tools, generation
// prompt, enable_thinking) and compares with the template itself, rendered by a Jinja
// engine (testdata/chat_cases.jsonl: @huggingface/jinja 0.5.11 on the chat_template of
// testdata/tokenizer_config.json, by gen_chat_cases.js).
func TestRenderQwen3ChatAgainstJinja(t *testing.T) {
	f, err := os.Open("testdata/chat_cases.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	n := 0
	for line := 1; sc.Scan(); line++ {
		var c struct {
			Messages []struct {
				Role             string  `json:"role"`
				Content          string  `json:"content"`
				ReasoningContent *string `json:"reasoning_content"`
				ToolCalls        []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
			Options struct {
				AddGenerationPrompt bool              `json:"add_generation_prompt"`
				EnableThinking      *bool             `json:"enable_thinking"`
				Tools               []json.RawMessage `json:"tools"`
			} `json:"options"`
			Rendered *string `json:"rendered"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		var msgs []Message
		for _, m := range c.Messages {
			msg := Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			msgs = append(msgs, msg)
		}
		opt := ChatOptions{AddGenerationPrompt: c.Options.AddGenerationPrompt,
			DisableThinking: c.Options.EnableThinking != nil && !*c.Options.EnableThinking}
		for _, tool := range c.Options.Tools {
			opt.Tools = append(opt.Tools, string(tool))
		}
		got, err := RenderQwen3Chat(msgs, opt)
		switch {
		case c.Rendered == nil && err == nil:
			t.Errorf("line %d: the template fails but RenderQwen3Chat gave %q", line, got)
		case c.Rendered != nil && err != nil:
			t.Errorf("line %d: %v", line, err)
		case c.Rendered != nil && got != *c.Rendered:
			t.Errorf("line %d:\ngot  %q\nwant %q", line, got, *c.Rendered)
		}
		n++
	}
	if n != 600 {
		t.Fatalf("read %d cases, want 600", n)
	}
}
