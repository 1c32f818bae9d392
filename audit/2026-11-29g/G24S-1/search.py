M=2**32-1
def perm(i,a,b):
    g=a*b; q,r=divmod(i,g); x,y=divmod(r,b); return q*g+y*a+x
best=None
# search a, b with group in (2^31, 2^32)
import itertools
for a in range(2,200):
    for b in set([ (M)//a - k for k in range(0,50)] + [ (2**32)//(a+1) - k for k in range(-3,50)]):
        if b<2 or a*b>M: continue
        g=a*b
        for i in range(M, M-3000, -1):
            row=perm(i,a,b)
            if row < 2**32: continue
            c=-(-2**64//row)
            if c>M: continue
            start=(row*c)%2**64
            L=start+c
            if start>=c: continue  # want overlap with row 0
            if best is None or L<best[0]:
                best=(L,a,b,i,row,c,start)
print(best)
