import re,sys,collections
txt=open(sys.argv[1]).read()
funcs=re.split(r'\n\s*Function : ',txt)[1:]
for f in funcs:
    name=f.split('\n',1)[0].strip()
    ins=[]
    for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);',f):
        ins.append((int(m.group(1),16),m.group(2).strip()))
    addr={a:i for i,(a,_) in enumerate(ins)}
    print(f"== {name}: {len(ins)} instructions")
    for i,(a,t) in enumerate(ins):
        m=re.search(r'BRA\s+(?:`\(\.L_x_\d+\)\s*)?.*?0x([0-9a-f]+)',t)
        if 'BRA' in t and m:
            tgt=int(m.group(1),16)
            if tgt<a and tgt in addr:
                body=ins[addr[tgt]:i+1]
                c=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',x[1]).split()[0].split('.')[0] for x in body)
                top=' '.join(f"{k}:{v}" for k,v in c.most_common(14))
                print(f"  loop {tgt:#x}-{a:#x}: {len(body)} instr; {top}")
