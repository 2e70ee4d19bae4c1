"""The graded labs' trusted harnesses, one per lab (named as the lab's folder in labs/).

Each imports the student's file (`harness.load_student`), runs it on every rank inside the
course's own code through public hook points only, and reports what it measured; the notebook's
tests grade those reports. The experiments that chapters and benchmarks launch live in
`zerobook.runs`; what both need lives in library modules (`zerobook.training`, `zerobook.fsdp2`,
`zerobook.sharded_checkpoint`).
"""
