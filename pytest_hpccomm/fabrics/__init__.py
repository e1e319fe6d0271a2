"""fabrics"""
